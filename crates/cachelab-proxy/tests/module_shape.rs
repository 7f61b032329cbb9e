//! The crate's shape stays as built: no two modules import each other, directly or
//! through others (read from the source by `cachelab_testkit::module_shape`).

#[test]
fn no_two_modules_import_each_other() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    cachelab_testkit::module_shape::assert_no_circles(&src);
}
