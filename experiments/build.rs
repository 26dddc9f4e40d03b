//! Writes the registry of families (`for_each_family!`) from the `//! family:` line each family's
//! module in `src/` carries, so that adding a family edits no list.
//!
//! The commit a record names is not stamped here: this crate is at the bottom of the workspace,
//! and a stamp that follows git would rebuild everything above it. The binaries stamp it (the
//! root package's and python/'s build.rs) and hand it over with `experiments::set_code_commit`.

/// One family as its module declares it: `//! family: ORDER Variant(Point) [Section] {Sample}`.
struct Declared {
    order: u32,
    module: String,
    doc: Vec<String>,
    entry: String,
}

/// The family a module declares, if it declares one.
fn declared(path: &std::path::Path) -> Option<Declared> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("//! family: "))?;
    let module = path.file_stem()?.to_str()?.to_string();
    let fail = |why: &str| -> ! { panic!("{}: `//! family: {line}`: {why}", path.display()) };
    let (order, rest) = line
        .split_once(' ')
        .unwrap_or_else(|| fail("expected ORDER Variant(Point)"));
    let order = order
        .parse()
        .unwrap_or_else(|_| fail("the order is not a whole number"));
    // Every type the entry names is the experiments crate's, wherever the macro expands.
    let mut entry = String::new();
    let mut word = String::new();
    for c in rest.chars().chain(std::iter::once(' ')) {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            let is_type = matches!(c, ')' | ']' | '}');
            entry.push_str(&if is_type {
                format!("$crate::{word}")
            } else {
                word.clone()
            });
            word.clear();
        }
        entry.push(c);
    }
    let doc = text
        .lines()
        .take_while(|l| l.starts_with("//!") && *l != "//!")
        .map(|l| format!("///{}", &l[3..]))
        .collect();
    Some(Declared {
        order,
        module,
        doc,
        entry: format!("{}: {}", path.file_stem()?.to_str()?, entry.trim()),
    })
}

/// Writes `for_each_family!` to `$OUT_DIR/families.rs`.
fn write_registry() {
    println!("cargo:rerun-if-changed=src");
    let mut families: Vec<Declared> = std::fs::read_dir("src")
        .expect("src/")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .filter_map(|p| declared(&p))
        .collect();
    families.sort_by_key(|f| f.order);
    for pair in families.windows(2) {
        assert!(
            pair[0].order != pair[1].order,
            "families {} and {} declare the same order {}",
            pair[0].module,
            pair[1].module,
            pair[0].order
        );
    }
    let mut out = String::from(
        "/// Calls `$callback!` with every family's entry, in their declared order:\n\
         /// `doc, module: Variant(Point) [Section]? {Sample}?` (see the `registry` module).\n\
         #[macro_export]\nmacro_rules! for_each_family {\n    ($callback:ident) => {\n        $callback! {\n",
    );
    for family in &families {
        for line in &family.doc {
            out.push_str(&format!("            {line}\n"));
        }
        out.push_str(&format!("            {},\n", family.entry));
    }
    out.push_str("        }\n    };\n}\n");
    let path = std::path::Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("families.rs");
    std::fs::write(path, out).expect("writing the registry");
}

fn main() {
    write_registry();
}
