//! README.md's `vds` sessions are real: every command in them is run here,
//! in a directory holding the session's input file, and must print exactly
//! what the README shows; what the sessions write is checked too.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// Runs the console block README.md marks with `marker` in a fresh
/// directory named after `tag` that holds the fixture `input`; returns the
/// directory and the number of commands run.
fn run_session(marker: &str, input: &str, tag: &str) -> (PathBuf, usize) {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let block = readme
        .split(&format!("<!-- {marker}: run by tool/tests/readme_session.rs -->\n```console\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("README.md has the {marker}"));
    let block = &block[..block.find("```").unwrap()];
    let dir = root().join("target/tmp").join(format!("{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(root().join("tool/tests/fixtures").join(input), dir.join(input)).unwrap();
    let mut commands = 0;
    for part in block.split("$ vds ").skip(1) {
        let (line, expected) = part.split_once('\n').unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_vds")).args(line.split_whitespace()).current_dir(&dir).output().unwrap();
        assert!(out.status.success(), "vds {line}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8(out.stdout).unwrap(), expected, "the output of `vds {line}` differs from README.md");
        commands += 1;
    }
    (dir, commands)
}

/// The session on the NumPy-written survey.npy; the picture it writes must be the README's.
#[test]
fn readme_session_is_real_output() {
    let (dir, commands) = run_session("vds session", "survey.npy", "readme-session");
    assert_eq!(commands, 4, "import, info, slice and verify");
    let picture = std::fs::read(dir.join("survey-inline4.png")).unwrap();
    assert!(
        picture == std::fs::read(root().join("docs/survey-inline4.png")).unwrap(),
        "docs/survey-inline4.png is not what the session writes"
    );
}

/// README.md's SEG-Y session, on the segyio-written survey.sgy; the file it
/// exports must be the original, byte for byte.
#[test]
fn readme_segy_session_is_real_output() {
    let (dir, commands) = run_session("vds SEG-Y session", "survey.sgy", "readme-segy-session");
    assert_eq!(commands, 4, "import, info, slice and export");
    assert!(std::fs::read(dir.join("survey.sgy")).unwrap() == std::fs::read(dir.join("survey2.sgy")).unwrap(), "the export differs");
}
