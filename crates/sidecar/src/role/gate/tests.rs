use std::os::unix::fs::MetadataExt;

use super::*;

fn inode(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().ino()
}

#[test]
fn marker_names_never_collide_with_idle() {
    assert_eq!(marker_name(Some("shop")), "active-shop");
    assert_eq!(marker_name(Some("idle")), "active-idle");
    assert_eq!(marker_name(None), "idle");
    let g = Gate::new("/run/rdmalb/n1");
    assert_eq!(
        g.marker(Some("blog")),
        PathBuf::from("/run/rdmalb/n1/active-blog")
    );
}

#[test]
fn the_first_open_creates_the_directory_and_one_marker() {
    let d = tempfile::tempdir().unwrap();
    let g = Gate::new(d.path().join("run/n1"));
    assert_eq!(g.open(Some("shop")).unwrap(), None);
    assert_eq!(g.markers().unwrap(), ["active-shop"]);
    assert!(g.marker(Some("shop")).is_file());
    // No temporary file is left behind.
    assert_eq!(std::fs::read_dir(g.dir()).unwrap().count(), 1);
}

#[test]
fn a_flip_renames_the_one_marker() {
    let d = tempfile::tempdir().unwrap();
    let g = Gate::new(d.path());
    g.open(Some("shop")).unwrap();
    let ino = inode(&g.marker(Some("shop")));
    assert_eq!(
        g.open(Some("blog")).unwrap().as_deref(),
        Some("active-shop")
    );
    assert_eq!(g.markers().unwrap(), ["active-blog"]);
    // The same file under its new name: one rename(2), so no instant had
    // both sites open or neither.
    assert_eq!(inode(&g.marker(Some("blog"))), ino);
    assert_eq!(g.open(None).unwrap().as_deref(), Some("active-blog"));
    assert_eq!(g.markers().unwrap(), ["idle"]);
    assert_eq!(inode(&g.marker(None)), ino);
    // Opening the open site changes nothing.
    g.open(Some("news")).unwrap();
    assert_eq!(
        g.open(Some("news")).unwrap().as_deref(),
        Some("active-news")
    );
    assert_eq!(g.markers().unwrap(), ["active-news"]);
}

#[test]
fn stray_markers_are_removed_never_left_open() {
    let d = tempfile::tempdir().unwrap();
    let g = Gate::new(d.path());
    for m in ["active-shop", "active-blog", "idle"] {
        std::fs::write(d.path().join(m), "").unwrap();
    }
    std::fs::write(d.path().join("unrelated"), "kept").unwrap();
    g.open(Some("news")).unwrap();
    assert_eq!(g.markers().unwrap(), ["active-news"]);
    assert!(
        d.path().join("unrelated").exists(),
        "only markers are touched"
    );

    for m in ["active-shop", "idle"] {
        std::fs::write(d.path().join(m), "").unwrap();
    }
    assert_eq!(
        g.open(Some("shop")).unwrap().as_deref(),
        Some("active-shop")
    );
    assert_eq!(g.markers().unwrap(), ["active-shop"]);
}

#[test]
fn restore_puts_the_previous_marker_back() {
    let d = tempfile::tempdir().unwrap();
    let g = Gate::new(d.path());
    g.open(Some("shop")).unwrap();
    let before = g.open(Some("blog")).unwrap();
    g.restore(before.as_deref()).unwrap();
    assert_eq!(g.markers().unwrap(), ["active-shop"]);
    // Nothing was open before: restoring closes every gate.
    g.restore(None).unwrap();
    assert!(g.markers().unwrap().is_empty());
}

#[test]
fn a_gate_that_is_not_a_directory_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("gate");
    std::fs::write(&file, "").unwrap();
    assert!(Gate::new(&file).open(Some("shop")).is_err());
}
