//! Which host a rank runs on: ranks with the same hostname and boot id
//! share a kernel, so they can share memory.

/// This process's host identity, `hostname/boot-id`, with no whitespace
/// or `=` (it travels in PMI lines).
pub fn host_id() -> String {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let host = read("/proc/sys/kernel/hostname");
    let boot = read("/proc/sys/kernel/random/boot_id");
    format!("{host}/{boot}")
        .chars()
        .map(|c| {
            if c.is_whitespace() || c == '=' {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// The world ranks whose host is `hosts[me]`, ascending.
pub fn same_host(hosts: &[String], me: usize) -> Vec<usize> {
    (0..hosts.len())
        .filter(|&q| hosts[q] == hosts[me])
        .collect()
}

/// Each rank's host as a number, counting hosts from 0 in order of their
/// first rank.
pub fn numbers(hosts: &[String]) -> Vec<u32> {
    let mut seen: Vec<&str> = Vec::new();
    hosts
        .iter()
        .map(|h| match seen.iter().position(|&s| s == h) {
            Some(i) => i as u32,
            None => {
                seen.push(h);
                (seen.len() - 1) as u32
            }
        })
        .collect()
}

/// How many ranks run on the same kernel as rank `me` (same boot id,
/// whatever their hostname), who share its cores, and `me`'s place among
/// them.
pub fn same_machine(hosts: &[String], me: usize) -> (usize, usize) {
    let boot = |h: &str| h.rsplit('/').next().unwrap_or("").to_string();
    let mine = boot(&hosts[me]);
    let same = |h: &&String| boot(h) == mine;
    (
        hosts.iter().filter(same).count(),
        hosts[..me].iter().filter(same).count(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_ids_group_ranks() {
        let id = host_id();
        assert!(id.contains('/') && !id.contains(' '));
        assert_eq!(id, host_id());
        let hosts: Vec<String> = ["a", "b", "a", "c", "b"].map(String::from).to_vec();
        assert_eq!(same_host(&hosts, 2), vec![0, 2]);
        assert_eq!(same_host(&hosts, 4), vec![1, 4]);
        assert_eq!(same_host(&hosts, 3), vec![3]);
        assert_eq!(numbers(&hosts), vec![0, 1, 0, 2, 1]);
        let ns: Vec<String> = ["h0/k1", "h1/k1", "h2/k2"].map(String::from).to_vec();
        assert_eq!(same_machine(&ns, 0), (2, 0));
        assert_eq!(same_machine(&ns, 1), (2, 1));
        assert_eq!(same_machine(&ns, 2), (1, 0));
    }
}
