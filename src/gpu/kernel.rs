//! The device path's reduction kernels: CUDA C compiled by NVRTC at run time
//! for the device at hand (one module holding a kernel per element type and
//! operation, loaded once per device and kept), launched on our stream.
//!
//! Each thread reduces whole elements in rank order, `acc = op(x_k, acc)`
//! for k = 1.. with the result rounded to the element type after every step,
//! exactly as the host kernels (`crate::reduce`) do, so device and host
//! results are the same bits; then it writes the element to every
//! destination.

use super::driver::{self, check, GpuError, Result, StreamHandle};
use crate::dtype::ElemType;
use crate::reduce::Op;
use cudarc::driver::sys;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::os::raw::c_int;
use std::sync::Mutex;

/// Most ranks one launch reduces (sources) or writes (destinations).
pub const MAX_RANKS: usize = 16;

/// The kernel's parameter block, passed by value (CUDA's limit is 4 KiB).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Args {
    /// Source buffers, in rank order.
    pub src: [u64; MAX_RANKS],
    /// Destination buffers.
    pub dst: [u64; MAX_RANKS],
    /// Per-source float factors (prescaling).
    pub fscale: [f64; MAX_RANKS],
    /// Per-source integer factors (prescaling).
    pub iscale: [i64; MAX_RANKS],
    /// First element reduced (index into the sources).
    pub begin: u64,
    /// One past the last.
    pub end: u64,
    /// Subtracted from an element's index to place it in a destination.
    pub dst_shift: u64,
    /// Sources.
    pub nsrc: c_int,
    /// Destinations.
    pub ndst: c_int,
    /// 0: plain; 1: each source scaled first (rounded to the type); 2: the
    /// result divided by `nsrc` (integer `ncclAvg`).
    pub mode: c_int,
    /// Padding to keep the layout explicit.
    pub pad: c_int,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            src: [0; MAX_RANKS],
            dst: [0; MAX_RANKS],
            fscale: [1.0; MAX_RANKS],
            iscale: [1; MAX_RANKS],
            begin: 0,
            end: 0,
            dst_shift: 0,
            nsrc: 0,
            ndst: 0,
            mode: 0,
            pad: 0,
        }
    }
}

/// The CUDA C shared by every specialisation; `fc_reduce` at its end names
/// the element type and operation.
const SOURCE: &str = r#"
typedef unsigned char u8; typedef unsigned short u16; typedef unsigned int u32;
typedef unsigned long long u64; typedef long long i64; typedef signed char i8;
#define MAXR 16
struct Args { u64 src[MAXR]; u64 dst[MAXR]; double fs[MAXR]; i64 is[MAXR];
              u64 begin, end, shift; int nsrc, ndst, mode, pad; };

__device__ __forceinline__ float h2f(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16 f2h(float f) { u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ float b2f(u16 h) { return __uint_as_float(((u32)h) << 16); }
__device__ __forceinline__ u16 f2b(float x) {
  u32 b = __float_as_uint(x);
  if (x != x) return (u16)((b >> 16) | 0x40);
  return (u16)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ float e4m3_to_f(u8 b) {
  u32 sign = ((u32)b & 0x80u) << 24, e = (b >> 3) & 0xf, m = b & 7, mag;
  if (e == 15 && m == 7) mag = 0x7fc00000u;
  else if (e == 0) {
    if (m == 0) mag = 0;
    else { int p = 31 - __clz(m); mag = ((u32)(p - 9 + 127) << 23) | ((m - (1u << p)) << (23 - p)); }
  } else mag = ((e + 127 - 7) << 23) | (m << 20);
  return __uint_as_float(sign | mag);
}
__device__ __forceinline__ float e5m2_to_f(u8 b) { return h2f((u16)((u16)b << 8)); }
/* Nearest even, saturating to the largest finite value; NaN to the NaN code. */
__device__ u8 encode8(float x, int man, int bias, double maxv) {
  u8 sign = (__float_as_uint(x) >> 24) & 0x80;
  if (x != x) return sign | 0x7f;
  double a = fabs((double)x);
  if (a == 0.0) return sign;
  int min_exp = 1 - bias;
  int ea = (int)((__double_as_longlong(a) >> 52) & 0x7ff) - 1023;
  double spacing = ldexp(1.0, max(ea, min_exp) - man);
  double v = fmin(rint(a / spacing) * spacing, maxv);
  u8 bits;
  if (v < ldexp(1.0, min_exp)) bits = (u8)(v / ldexp(1.0, min_exp - man));
  else {
    int e = (int)((__double_as_longlong(v) >> 52) & 0x7ff) - 1023;
    u8 m = (u8)((v / ldexp(1.0, e) - 1.0) * ldexp(1.0, man));
    bits = (u8)(((e + bias) << man) | m);
  }
  return sign | bits;
}

template <class T, class U> struct Int {
  typedef T S; typedef T C;
  static __device__ C ld(S v) { return v; }
  static __device__ S st(C v) { return v; }
  static __device__ C add(C a, C b) { return (T)((U)a + (U)b); }
  static __device__ C mul(C a, C b) { return (T)((U)a * (U)b); }
  static __device__ C scale(C a, double, i64 k) { return (T)((U)a * (U)k); }
  static __device__ C div(C a, int n) { return (T)(a / (T)n); }
};
template <class T> struct Flt {
  typedef T S; typedef T C;
  static __device__ C ld(S v) { return v; }
  static __device__ S st(C v) { return v; }
  static __device__ C add(C a, C b) { return a + b; }
  static __device__ C mul(C a, C b) { return a * b; }
  static __device__ C scale(C a, double f, i64) { return a * (T)f; }
  static __device__ C div(C a, int) { return a; }
};
#define NARROW(NAME, STORE, LD, ST)                                              \
  struct NAME {                                                                  \
    typedef STORE S; typedef float C;                                            \
    static __device__ C ld(S v) { return LD(v); }                                \
    static __device__ S st(C v) { return ST(v); }                                \
    static __device__ C add(C a, C b) { return a + b; }                          \
    static __device__ C mul(C a, C b) { return a * b; }                          \
    static __device__ C scale(C a, double f, i64) { return a * (float)f; }       \
    static __device__ C div(C a, int) { return a; }                              \
  };
__device__ u8 f2e4m3(float x) { return encode8(x, 3, 7, 448.0); }
__device__ u8 f2e5m2(float x) { return encode8(x, 2, 15, 57344.0); }
NARROW(F16, u16, h2f, f2h)
NARROW(BF16, u16, b2f, f2b)
NARROW(E4M3, u8, e4m3_to_f, f2e4m3)
NARROW(E5M2, u8, e5m2_to_f, f2e5m2)

/* s: the incoming value, d: the accumulator, as the host kernels name them. */
struct Sum { template <class T> static __device__ typename T::C f(typename T::C s, typename T::C d) { return T::add(s, d); } };
struct Prod { template <class T> static __device__ typename T::C f(typename T::C s, typename T::C d) { return T::mul(s, d); } };
struct Max { template <class T> static __device__ typename T::C f(typename T::C s, typename T::C d) { return d > s ? d : s; } };
struct Min { template <class T> static __device__ typename T::C f(typename T::C s, typename T::C d) { return d < s ? d : s; } };

template <class T, class O> __device__ void run(const Args& a) {
  typedef typename T::S S; typedef typename T::C C;
  u64 stride = (u64)gridDim.x * blockDim.x;
  for (u64 i = a.begin + (u64)blockIdx.x * blockDim.x + threadIdx.x; i < a.end; i += stride) {
    C acc = T::ld(((const S*)a.src[0])[i]);
    if (a.mode == 1) acc = T::ld(T::st(T::scale(acc, a.fs[0], a.is[0])));
    for (int k = 1; k < a.nsrc; k++) {
      C x = T::ld(((const S*)a.src[k])[i]);
      if (a.mode == 1) x = T::ld(T::st(T::scale(x, a.fs[k], a.is[k])));
      acc = T::ld(T::st(O::template f<T>(x, acc)));
    }
    if (a.mode == 2) acc = T::div(acc, a.nsrc);
    S out = T::st(acc);
    for (int k = 0; k < a.ndst; k++) ((S*)a.dst[k])[i - a.shift] = out;
  }
}
"#;

/// Element types with a device kernel (those `names` knows).
fn types() -> impl Iterator<Item = ElemType> {
    ElemType::ALL
        .into_iter()
        .filter(|&t| names(t, Op::Sum).is_some())
}

/// Operations with a device kernel.
const OPS: [Op; 4] = [Op::Sum, Op::Prod, Op::Max, Op::Min];

/// The C++ type and operation names of a specialisation.
fn names(ty: ElemType, op: Op) -> Option<(&'static str, &'static str)> {
    let t = match ty {
        ElemType::I8 => "Int<i8, u8>",
        ElemType::U8 => "Int<u8, u8>",
        ElemType::I32 => "Int<int, u32>",
        ElemType::U32 => "Int<u32, u32>",
        ElemType::I64 => "Int<i64, u64>",
        ElemType::U64 => "Int<u64, u64>",
        ElemType::F16 => "F16",
        ElemType::Bf16 => "BF16",
        ElemType::F32 => "Flt<float>",
        ElemType::F64 => "Flt<double>",
        ElemType::F8E4M3 => "E4M3",
        ElemType::F8E5M2 => "E5M2",
        _ => return None,
    };
    let o = match op {
        Op::Sum => "Sum",
        Op::Prod => "Prod",
        Op::Max => "Max",
        Op::Min => "Min",
        _ => return None,
    };
    Some((t, o))
}

/// The kernel's name for `ty` and `op`, e.g. `fc_reduce_3_0`.
fn entry(ty: ElemType, op: Op) -> String {
    let t = ElemType::ALL.iter().position(|&t| t == ty).unwrap_or(99);
    let o = OPS.iter().position(|&o| o == op).unwrap_or(99);
    format!("fc_reduce_{t}_{o}")
}

/// The CUDA C of the module: the shared code and one kernel per type and op.
fn source() -> String {
    let mut src = SOURCE.to_string();
    for ty in types() {
        for op in OPS {
            let (t, o) = names(ty, op).expect("listed");
            src.push_str(&format!(
                "extern \"C\" __global__ void {}(Args a) {{ run<{t}, {o}>(a); }}\n",
                entry(ty, op)
            ));
        }
    }
    src
}

/// A device's kernels by (type, op), as `CUfunction` addresses, and its
/// multiprocessor count (the launches' grid bound).
struct Kernels {
    fns: HashMap<(ElemType, Op), usize>,
    sms: u64,
}

/// Per device: its kernels, or why there are none.
type Loaded = std::result::Result<Kernels, GpuError>;

static LOADED: Mutex<Option<HashMap<c_int, Loaded>>> = Mutex::new(None);

/// Compiles and loads every kernel for `device` (whose context is current),
/// once per process. Call it while none of the process's streams waits for
/// the device path: loading a module may wait for all work on the device.
pub fn load(device: c_int) -> Result<()> {
    let mut m = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    let m = m.get_or_insert_with(HashMap::new);
    m.entry(device)
        .or_insert_with(|| load_module(device))
        .as_ref()
        .map(|_| ())
        .map_err(Clone::clone)
}

fn load_module(device: c_int) -> Loaded {
    let major = driver::attribute(
        device,
        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
    )?;
    let minor = driver::attribute(
        device,
        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
    )?;
    let ptx = compile(&source(), major, minor)?;
    let image = CString::new(ptx).map_err(|_| GpuError("NVRTC's PTX holds a NUL".into()))?;
    let mut module: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: a NUL-terminated PTX image; out-pointer to a local. The module
    // stays loaded for the process's life.
    check(
        unsafe { sys::cuModuleLoadData(&mut module, image.as_ptr() as *const c_void) },
        "cuModuleLoadData",
    )?;
    let mut fns = HashMap::new();
    for ty in types() {
        for op in OPS {
            let name = CString::new(entry(ty, op)).expect("no NUL");
            let mut f: sys::CUfunction = std::ptr::null_mut();
            // SAFETY: our loaded module; out-pointer to a local. Getting
            // each function now loads it now (no lazy load later, while
            // streams wait for us).
            check(
                unsafe { sys::cuModuleGetFunction(&mut f, module, name.as_ptr()) },
                "cuModuleGetFunction",
            )?;
            // Loads it now where the driver loads lazily (CUDA 12.4 on);
            // older drivers lack the call, which is then no loss.
            let _ = std::panic::catch_unwind(|| {
                // SAFETY: a function of our loaded module.
                unsafe { sys::cuFuncLoad(f) }
            });
            fns.insert((ty, op), f as usize);
        }
    }
    let sms = driver::attribute(
        device,
        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
    )?
    .max(1) as u64;
    Ok(Kernels { fns, sms })
}

/// The loaded kernel for `ty` and `op` on `device`, and the device's
/// multiprocessor count.
fn function(device: c_int, ty: ElemType, op: Op) -> Result<(sys::CUfunction, u64)> {
    let m = LOADED.lock().unwrap_or_else(|p| p.into_inner());
    match m.as_ref().and_then(|m| m.get(&device)) {
        Some(Ok(k)) => k
            .fns
            .get(&(ty, op))
            .map(|&f| (f as sys::CUfunction, k.sms))
            .ok_or_else(|| GpuError(format!("no device kernel for {op:?} on {ty:?}"))),
        Some(Err(e)) => Err(e.clone()),
        None => Err(GpuError("the device kernels were not loaded".into())),
    }
}

/// NVRTC: CUDA C to PTX for compute capability `major.minor`.
fn compile(src: &str, major: c_int, minor: c_int) -> Result<String> {
    // SAFETY: only dlopens candidate names.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(GpuError(
            "NVRTC (libnvrtc.so) is not on the library path: the device reduction kernel \
             is compiled at run time (put CUDA's lib64 on LD_LIBRARY_PATH, or use \
             FERROCOLL_ALGO=gpu=staged)"
                .into(),
        ));
    }
    let opts = cudarc::nvrtc::CompileOptions {
        options: vec![format!("--gpu-architecture=compute_{major}{minor}")],
        ..Default::default()
    };
    // cudarc panics rather than erring in a few corners (a missing symbol):
    // keep that inside.
    std::panic::catch_unwind(|| cudarc::nvrtc::compile_ptx_with_opts(src, opts))
        .map_err(|_| GpuError("NVRTC panicked while compiling the reduction kernel".into()))?
        .map(|p| p.to_src())
        .map_err(|e| {
            GpuError(format!(
                "NVRTC could not compile the reduction kernel: {e:?}"
            ))
        })
}

/// Queues a reduction of `args.begin..args.end` on `on`, on `device`.
///
/// # Safety
/// Every source and destination in `args` is device memory of this context
/// (or mapped into it) holding the elements the range names, and stays so
/// until `on` (a stream of this process) has run the kernel.
pub unsafe fn reduce(
    device: c_int,
    ty: ElemType,
    op: Op,
    args: &Args,
    on: StreamHandle,
) -> Result<()> {
    if args.end <= args.begin {
        return Ok(());
    }
    let (f, sms) = function(device, ty, op)?;
    let threads = 512u64;
    let blocks = (args.end - args.begin).div_ceil(threads).clamp(1, sms * 4);
    let mut a = *args;
    let mut params = [&mut a as *mut Args as *mut c_void];
    // SAFETY: one parameter, the Args block the kernel declares; pointers
    // in it per the contract above.
    check(
        unsafe {
            sys::cuLaunchKernel(
                f,
                blocks as u32,
                1,
                1,
                threads as u32,
                1,
                1,
                0,
                on as sys::CUstream,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        },
        "cuLaunchKernel",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVRTC needs no GPU: where its library is found, the module (every
    /// type and op) must compile, here for a Hopper GPU.
    #[test]
    fn every_kernel_compiles_where_nvrtc_is_present() {
        // SAFETY: only dlopens candidate names.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            eprintln!("SKIP: no NVRTC library on this machine");
            return;
        }
        assert_eq!(types().count(), 12, "NCCL's twelve types");
        let t = std::time::Instant::now();
        let ptx = compile(&source(), 9, 0).unwrap_or_else(|e| panic!("{e}"));
        eprintln!("compiled in {:?}", t.elapsed());
        for ty in types() {
            for op in OPS {
                let e = format!(".entry {}(", entry(ty, op));
                assert!(ptx.contains(&e), "{e}");
            }
        }
    }

    #[test]
    fn args_layout_matches_the_kernel() {
        // 4 arrays of 16 eight-byte values, 3 u64, 4 ints.
        assert_eq!(
            std::mem::size_of::<super::Args>(),
            4 * 16 * 8 + 3 * 8 + 4 * 4
        );
    }
}
