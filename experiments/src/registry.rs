//! The registry of experiment families. Every per-family list in every crate (the [`Family`]
//! enum, the typed [`Workload`], a profile's sections, a calibration's samples, the models the
//! simulator dispatches to, the probes the GPU backend loads) is generated from it by
//! [`for_each_family!`], so a family that is half added fails to compile.
//!
//! The registry is written by the build script from one line in each family's module here:
//! `//! family: ORDER Variant(Point) [Section] {Sample}`. The module's name is the family's name,
//! the same in `experiments`, `sim` and `hw`, each holding that layer's part of the family;
//! ORDER places it in `vramlab list`, and orders calibration and fitting (a family comes after
//! the ones it builds on); `[Section]` is its optional profile section and `{Sample}` its
//! calibration samples, where it has them. The first paragraph of the module's documentation
//! documents its [`Family`] variant.
//!
//! [`Family`]: crate::Family
//! [`Workload`]: crate::Workload

include!(concat!(env!("OUT_DIR"), "/families.rs"));

/// Section (and calibration part) names from before each family had one name in every layer,
/// and the family's name that replaced them: each family's own row says its former name.
pub fn former_names() -> Vec<(&'static str, &'static str)> {
    crate::Family::ALL
        .into_iter()
        .filter_map(|family| family.former_name().map(|old| (old, family.name())))
        .collect()
}
