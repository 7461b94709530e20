//! Gives the shared library a SONAME, so programs that link it by full path
//! record `libferrocoll.so` rather than the build directory.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libferrocoll.so");
    println!("cargo:rerun-if-changed=build.rs");
}
