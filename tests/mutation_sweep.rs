//! Damage is never returned as data. Small valid containers (several types,
//! codecs, edge chunks and two commits each) get every byte flipped in turn,
//! and a tiny one every bit; each damaged file is opened and read
//! everywhere. Every outcome must be a reported error, exactly the last
//! commit's values (the byte was not used by it), or — only when the byte
//! lies in the newest commit slot — exactly the previous commit's values,
//! which is what an interrupted commit leaves and what a reader must accept.

mod common;
use common::record_reliability;
use vds::fuzzing::{check_damaged, sample, Outcome};

fn tally(outcomes: &[Outcome]) -> [usize; 3] {
    let mut t = [0; 3];
    for o in outcomes {
        t[match o {
            Outcome::Refused => 0,
            Outcome::Unchanged => 1,
            Outcome::PreviousCommit => 2,
        }] += 1;
    }
    t
}

#[test]
fn every_flipped_byte_is_reported_or_harmless() {
    let mut lines = String::new();
    for seed in [[3u8; 48], [200u8; 48], [77u8; 48], [1u8; 48]] {
        let s = sample(&seed);
        // A sweep is only worth something if there is data to damage and an older commit to tell apart.
        assert!(s.stored_chunks > 0 && s.commits[0] != s.commits[1], "seed {} makes a degenerate sample", seed[0]);
        let outcomes: Vec<Outcome> = (0..s.bytes.len())
            .map(|i| {
                let mut d = s.bytes.clone();
                d[i] ^= 0xff;
                check_damaged(&s, &d, i..i + 1)
            })
            .collect();
        let [refused, unchanged, previous] = tally(&outcomes);
        assert!(refused > 0 && unchanged > 0, "{refused} {unchanged} {previous}");
        lines.push_str(&format!("| byte flips | {} | {refused} | {unchanged} | {previous} |\n", s.bytes.len()));
    }
    let s = sample(&[9u8; 48]);
    assert!(s.stored_chunks > 0 && s.commits[0] != s.commits[1]);
    let mut outcomes = Vec::new();
    for i in 0..s.bytes.len() {
        for bit in 0..8 {
            let mut d = s.bytes.clone();
            d[i] ^= 1 << bit;
            outcomes.push(check_damaged(&s, &d, i..i + 1));
        }
    }
    let [refused, unchanged, previous] = tally(&outcomes);
    lines.push_str(&format!("| bit flips | {} | {refused} | {unchanged} | {previous} |\n", outcomes.len()));
    record_reliability(
        "mutation-sweep",
        &format!(
            "## Mutation sweep (tests/mutation_sweep.rs)\n\n\
             Small containers (random type, codec and chunking, two commits) with every byte flipped, and one with \
             every bit flipped; each damaged file opened and read everywhere (both orders, strided regions, stats, \
             verify). No flip returned values other than a committed state.\n\n\
             | sweep | damaged files | reported as an error | values unchanged (byte unused) | previous commit (newest slot damaged) |\n\
             |---|---|---|---|---|\n{lines}\n"
        ),
    );
}
