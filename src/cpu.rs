//! Which x86-64 CPU this is (`cpuid`), for defaults measured on one vendor's
//! CPUs and not another's (`copy::whole_from`, `comm::engine`'s reads of
//! busy senders' messages).

use std::sync::OnceLock;

/// The CPU's maker, as far as the defaults care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    /// `GenuineIntel`.
    Intel,
    /// `AuthenticAMD`, with its family (base plus extended, as
    /// `/proc/cpuinfo`'s "cpu family": 0x19 Zen 3-4, 0x1a Zen 5).
    Amd(u32),
    /// Any other, or no `cpuid` (another architecture, Miri).
    Other,
}

/// This CPU's vendor, read with `cpuid` once (in a virtual machine each
/// `cpuid` traps to the hypervisor).
pub fn vendor() -> Vendor {
    static VENDOR: OnceLock<Vendor> = OnceLock::new();
    *VENDOR.get_or_init(read_vendor)
}

/// `vendor`, read now.
fn read_vendor() -> Vendor {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use std::arch::x86_64::__cpuid;
        let v = __cpuid(0);
        let name: Vec<u8> = [v.ebx, v.edx, v.ecx]
            .iter()
            .flat_map(|r| r.to_le_bytes())
            .collect();
        match name.as_slice() {
            b"GenuineIntel" => return Vendor::Intel,
            b"AuthenticAMD" => {
                let eax = __cpuid(1).eax;
                let base = (eax >> 8) & 0xf;
                return Vendor::Amd(if base == 0xf {
                    base + ((eax >> 20) & 0xff)
                } else {
                    base
                });
            }
            _ => {}
        }
    }
    Vendor::Other
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `vendor` agrees with `/proc/cpuinfo`'s "vendor_id" and "cpu
    /// family". Fails if either is read wrong.
    #[test]
    fn vendor_matches_cpuinfo() {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |k: &str| {
            info.lines()
                .find(|l| l.starts_with(k))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        };
        let x86 = cfg!(all(target_arch = "x86_64", not(miri)));
        let want = match field("vendor_id").as_deref() {
            Some("GenuineIntel") if x86 => Vendor::Intel,
            Some("AuthenticAMD") if x86 => Vendor::Amd(
                field("cpu family")
                    .and_then(|f| f.parse().ok())
                    .expect("an AMD CPU's family in /proc/cpuinfo"),
            ),
            _ => Vendor::Other,
        };
        assert_eq!(vendor(), want);
    }
}
