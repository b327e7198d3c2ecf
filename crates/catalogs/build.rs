//! Reads the upstream catalogs (`catalogs/*.toml`) at build time, into the
//! types of `src/catalogs/schema.rs` (this is the `rootcause-catalogs` crate's
//! build script), and writes each as JSON under
//! `OUT_DIR/catalogs/`: parsing half a megabyte of TOML took the binary
//! more time than analysing a small input, JSON into the same types takes
//! a tenth of it. The TOML stays the only source; a file that does not
//! parse is written as its error, which the catalogs' test reports with
//! the file, line and column (and the build warns).

#[allow(dead_code)]
#[path = "../../src/catalogs/schema.rs"]
mod schema;

use std::path::Path;

fn main() {
    // The repository's root, two folders above this crate's Cargo.toml.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    println!("cargo::rerun-if-changed=../../catalogs");
    println!("cargo::rerun-if-changed=../../src/catalogs/schema.rs");
    let out = Path::new(&std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("catalogs");
    std::fs::create_dir_all(&out).expect("OUT_DIR is writable");
    let mut files: Vec<_> = std::fs::read_dir(root.join("catalogs"))
        .expect("catalogs/ is at the repository's root")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    for path in files {
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("catalog file names are UTF-8");
        let built = match std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|text| toml::from_str::<schema::File>(&text).map_err(|e| e.to_string()))
        {
            Ok(file) => schema::Built::File(file),
            Err(e) => {
                let e = format!("catalogs/{name}.toml: {e}");
                println!("cargo::warning={}", e.lines().next().unwrap_or_default());
                schema::Built::Error(e)
            }
        };
        let json = serde_json::to_string(&built).expect("the schema serializes");
        std::fs::write(out.join(format!("{name}.json")), json).expect("OUT_DIR is writable");
    }
}
