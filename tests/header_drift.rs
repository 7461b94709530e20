//! The committed C headers must equal what cbindgen generates from the
//! sources. Regenerate with `FERROCOLL_BLESS=1 cargo test --test header_drift`.

use std::path::Path;

/// Generates `header` from the module tree at `src` with `config`, and
/// compares it with the committed file (or writes it when blessing).
fn check(config: &str, src: &str, header: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(root.join(config)).expect("cbindgen config");
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_src(root.join(src))
        .with_config(config)
        .generate()
        .expect("cbindgen runs")
        .write(&mut out);
    let generated = String::from_utf8(out).expect("utf-8 header");
    let path = root.join(header);
    if std::env::var_os("FERROCOLL_BLESS").is_some() {
        std::fs::create_dir_all(root.join("include")).unwrap();
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{header} is stale: run `FERROCOLL_BLESS=1 cargo test --test header_drift` and commit it"
    );
}

#[test]
fn mpi_h_is_up_to_date() {
    check("cbindgen.toml", "src/ffi/mpi/mod.rs", "include/mpi.h");
}

#[test]
fn nccl_h_is_up_to_date() {
    check(
        "cbindgen-nccl.toml",
        "src/ffi/nccl/mod.rs",
        "include/nccl.h",
    );
}
