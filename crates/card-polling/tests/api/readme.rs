//! The README states the limits the code enforces; a changed limit fails here until the README
//! says so too.

/// The 200,000-row limit of one import request was written only in the
/// route's source (D-import-in-parts).
#[test]
fn the_readme_states_the_import_row_limit() {
    let readme = include_str!("../../README.md");
    let n = card_polling::http::routes::admin::MAX_IMPORT_ROWS.to_string();
    // 200000 → 200,000
    let mut grouped = String::new();
    for (i, c) in n.chars().enumerate() {
        if i > 0 && (n.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let want = format!("{grouped} rows of each list");
    assert!(
        readme.contains(&want) && readme.contains("MAX_IMPORT_ROWS"),
        "crates/card-polling/README.md does not say `{want}` (MAX_IMPORT_ROWS)"
    );
}
