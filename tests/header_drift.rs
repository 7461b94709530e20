//! The committed C header must equal what cbindgen generates from the
//! sources. Regenerate with `FERROCOLL_BLESS=1 cargo test --test header_drift`.

use std::path::Path;

#[test]
fn mpi_h_is_up_to_date() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_crate(root)
        .with_config(config)
        .generate()
        .expect("cbindgen runs")
        .write(&mut out);
    let generated = String::from_utf8(out).expect("utf-8 header");
    let path = root.join("include/mpi.h");
    if std::env::var_os("FERROCOLL_BLESS").is_some() {
        std::fs::create_dir_all(root.join("include")).unwrap();
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/mpi.h is stale: run `FERROCOLL_BLESS=1 cargo test --test header_drift` and commit it"
    );
}
