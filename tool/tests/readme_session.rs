//! README.md's `vds` session is real: every command in it is run here, in a
//! directory holding the NumPy-written survey.npy, and must print exactly
//! what the README shows; the picture it writes must be the README's.

use std::path::Path;
use std::process::Command;

#[test]
fn readme_session_is_real_output() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let block = readme
        .split("<!-- vds session: run by tool/tests/readme_session.rs -->\n```console\n")
        .nth(1)
        .expect("README.md has the vds session");
    let block = &block[..block.find("```").unwrap()];
    let dir = root.join("target/tmp").join(format!("readme-session-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(root.join("tool/tests/fixtures/survey.npy"), dir.join("survey.npy")).unwrap();
    let mut commands = 0;
    for part in block.split("$ vds ").skip(1) {
        let (line, expected) = part.split_once('\n').unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_vds")).args(line.split_whitespace()).current_dir(&dir).output().unwrap();
        assert!(out.status.success(), "vds {line}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8(out.stdout).unwrap(), expected, "the output of `vds {line}` differs from README.md");
        commands += 1;
    }
    assert_eq!(commands, 4, "import, info, slice and verify");
    let picture = std::fs::read(dir.join("survey-inline4.png")).unwrap();
    assert!(
        picture == std::fs::read(root.join("docs/survey-inline4.png")).unwrap(),
        "docs/survey-inline4.png is not what the session writes"
    );
}

/// README.md's SEG-Y session: the same, on the segyio-written survey.sgy;
/// the file it exports must be the original, byte for byte.
#[test]
fn readme_segy_session_is_real_output() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let block = readme
        .split("<!-- vds SEG-Y session: run by tool/tests/readme_session.rs -->\n```console\n")
        .nth(1)
        .expect("README.md has the SEG-Y session");
    let block = &block[..block.find("```").unwrap()];
    let dir = root.join("target/tmp").join(format!("readme-segy-session-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(root.join("tool/tests/fixtures/survey.sgy"), dir.join("survey.sgy")).unwrap();
    let mut commands = 0;
    for part in block.split("$ vds ").skip(1) {
        let (line, expected) = part.split_once('\n').unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_vds")).args(line.split_whitespace()).current_dir(&dir).output().unwrap();
        assert!(out.status.success(), "vds {line}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8(out.stdout).unwrap(), expected, "the output of `vds {line}` differs from README.md");
        commands += 1;
    }
    assert_eq!(commands, 4, "import, info, slice and export");
    assert!(std::fs::read(dir.join("survey.sgy")).unwrap() == std::fs::read(dir.join("survey2.sgy")).unwrap(), "the export differs");
}
