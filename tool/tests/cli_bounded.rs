//! `--codec bounded:TOL` and `bounded:P%` through the real `vds` binary:
//! a relative tolerance resolved against the value range NumPy reckons, and
//! every value read back within it; malformed and out-of-range tolerances
//! refused.

mod common;

use common::*;
use vds::{DType, Dataset, Order, Region};

/// The tolerance `vds info` shows for a bounded variable: `error <= T`.
fn shown_tolerance(info: &str, var: &str) -> f64 {
    let vars = info.split("\nvariables:\n").nth(1).unwrap_or_else(|| panic!("no variables in {info}"));
    let at = vars.find(&format!("  {var} ")).unwrap_or_else(|| panic!("no variable {var} in {info}"));
    // The variable's line and the one of its chunks and codec.
    let lines = vars[at..].lines().take(2).collect::<Vec<_>>().join("\n");
    let text = lines.split("error <= ").nth(1).unwrap_or_else(|| panic!("{var} is not bounded: {info}"));
    text.split(' ').next().unwrap().parse().unwrap()
}

/// The smallest and largest finite values of `values`.
fn finite_range(values: impl IntoIterator<Item = f64>) -> (f64, f64) {
    values.into_iter().filter(|x| x.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)))
}

/// Every value of `got` is within `tol` of `want`'s, NaNs and infinities the same.
fn within(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        if w.is_finite() {
            assert!((g - w).abs() <= tol, "{what}[{k}]: {g} for {w}, more than {tol} away");
        } else {
            assert!(g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()), "{what}[{k}]: {g} for {w}");
        }
    }
}

/// `--codec bounded:P%` on import: each float variable's tolerance is P
/// percent of its value range, here computed from what NumPy wrote (NaNs,
/// infinities and missing values not counting), and every value read back
/// is within it.
#[test]
fn import_with_a_relative_tolerance_bounds_the_error_by_a_share_of_the_range() {
    let dir = scratch("relative");
    // NumPy's own reckoning of the bound: 1 % of the finite values' range.
    let numpy = python(
        &dir,
        r#"
import numpy as np
rng = np.random.default_rng(11)
z = np.linspace(0, 6, 24)
a = (40 * np.sin(z)[:, None, None] + 3 * rng.standard_normal((24, 20, 16)) - 7).astype(np.float32)
a[3, 4, 5], a[7, 1, 2], a[9, 9, 9] = np.nan, np.inf, -np.inf
np.save("wave.npy", a)
np.save("flat.npy", np.full((5, 6), 2.5))
np.save("huge.npy", np.array([-1e308, 0.0, 1e308]))
f = a[np.isfinite(a)].astype(np.float64)
print(repr(float(0.01 * (f.max() - f.min()))))
"#,
    );
    let numpy_tol: f64 = numpy.trim().parse().unwrap();
    // The data as NumPy wrote them: little-endian float32, C order, after the header.
    let bytes = std::fs::read(dir.join("wave.npy")).unwrap();
    assert!(String::from_utf8_lossy(&bytes[..128]).contains("'descr': '<f4', 'fortran_order': False, 'shape': (24, 20, 16)"));
    let want: Vec<f64> =
        bytes[bytes.len() - 24 * 20 * 16 * 4..].chunks_exact(4).map(|b| f64::from(f32::from_le_bytes(b.try_into().unwrap()))).collect();
    let (lo, hi) = finite_range(want.iter().copied());
    let tol = 0.01 * (hi - lo);
    assert_eq!(tol, numpy_tol);
    ok(&dir, &["import", "wave.npy", "wave.vds", "--codec", "bounded:1%", "--chunk", "8,8,8"]);
    let info = ok(&dir, &["info", "wave.vds"]);
    assert_eq!(shown_tolerance(&info, "wave"), tol, "{info}");
    assert!(info.contains(&format!("bounded, error <= {tol} (graded anchored interpolation prediction, zstd level 3)")), "{info}");
    let ds = Dataset::open(dir.join("wave.vds")).unwrap();
    let got: Vec<f32> = ds.read_vec("wave", &Region::full(&[24, 20, 16]).unwrap(), Order::C).unwrap();
    let got: Vec<f64> = got.into_iter().map(f64::from).collect();
    within(&got, &want, tol, "wave");
    assert!(got.iter().zip(&want).any(|(g, w)| g != w), "stored without loss: the bound was not used");
    // The same in blocks: each a bounded stream of its own, within the same bound.
    ok(&dir, &["import", "wave.npy", "wave-blocks.vds", "--codec", "bounded:1%", "--chunk", "8,8,8", "--blocks", "4,4,8"]);
    let ds = Dataset::open(dir.join("wave-blocks.vds")).unwrap();
    assert_eq!(ds.variables()[0].block_shape(), Some(&[4u64, 4, 8][..]));
    let got: Vec<f32> = ds.read_vec("wave", &Region::full(&[24, 20, 16]).unwrap(), Order::C).unwrap();
    within(&got.into_iter().map(f64::from).collect::<Vec<f64>>(), &want, tol, "wave in blocks");

    // Big-endian float64 (the range is of the values, not of their bytes).
    let exact = Dataset::open({
        ok(&dir, &["import", &fixture("float64_big_endian.npy"), "be.vds"]);
        dir.join("be.vds")
    })
    .unwrap();
    let be = &exact.variables()[0];
    let region = Region::full(be.shape()).unwrap();
    let want: Vec<f64> = exact.read_vec(0, &region, Order::C).unwrap();
    let (lo, hi) = finite_range(want.iter().copied());
    ok(&dir, &["import", &fixture("float64_big_endian.npy"), "be2.vds", "--codec", "bounded:2.5%"]);
    let info = ok(&dir, &["info", "be2.vds"]);
    assert_eq!(shown_tolerance(&info, be.name()), 0.025 * (hi - lo), "{info}");
    let got: Vec<f64> = Dataset::open(dir.join("be2.vds")).unwrap().read_vec(0, &region, Order::C).unwrap();
    within(&got, &want, 0.025 * (hi - lo), "float64_big_endian");

    // A .ds file: each float variable has its own range, its missing values
    // left out; the other types are stored exactly.
    ok(&dir, &["import", &fixture("mixed.ds"), "mixed.vds"]);
    ok(&dir, &["import", &fixture("mixed.ds"), "mixed-rel.vds", "--codec", "bounded:1%"]);
    let (exact, rel) = (Dataset::open(dir.join("mixed.vds")).unwrap(), Dataset::open(dir.join("mixed-rel.vds")).unwrap());
    let info = ok(&dir, &["info", "mixed-rel.vds"]);
    let mut floats = 0;
    for (i, v) in exact.variables().iter().enumerate() {
        let region = Region::full(v.shape()).unwrap();
        let mut raw = vec![0u8; v.shape().iter().product::<u64>() as usize * v.dtype().size()];
        exact.read_bytes(i, &region, Order::C, &mut raw).unwrap();
        let mut back = raw.clone();
        rel.read_bytes(i, &region, Order::C, &mut back).unwrap();
        if v.dtype() != DType::Float64 && v.dtype() != DType::Float32 {
            assert!(raw == back, "{} changed", v.name());
            continue;
        }
        floats += 1;
        let as_f64 = |b: &[u8]| match v.dtype() {
            DType::Float32 => b.chunks_exact(4).map(|e| f64::from(f32::from_ne_bytes(e.try_into().unwrap()))).collect::<Vec<f64>>(),
            _ => b.chunks_exact(8).map(|e| f64::from_ne_bytes(e.try_into().unwrap())).collect(),
        };
        let (want, got) = (as_f64(&raw), as_f64(&back));
        let missing: Vec<bool> = match exact.variable(format!("{}:missing", v.name()).as_str()) {
            Ok(_) => exact.read_vec(format!("{}:missing", v.name()).as_str(), &region, Order::C).unwrap(),
            Err(_) => vec![false; want.len()],
        };
        let (lo, hi) = finite_range(want.iter().zip(&missing).filter(|(_, m)| !**m).map(|(w, _)| *w));
        if hi > lo {
            assert_eq!(shown_tolerance(&info, v.name()), 0.01 * (hi - lo), "{}: {info}", v.name());
            within(&got, &want, 0.01 * (hi - lo), v.name());
        } else {
            // One value, or all equal: nothing to lose, stored exactly.
            assert!(raw == back, "{} changed", v.name());
        }
    }
    assert!(floats >= 2, "mixed.ds has {floats} float variables");

    // All values equal: stored exactly (zstd).
    ok(&dir, &["import", "flat.npy", "flat.vds", "--codec", "bounded:1%"]);
    assert!(ok(&dir, &["info", "flat.vds"]).contains("zstd level 3 + shuffle"));
    // A range wider than the largest tolerance.
    let e = fails(&dir, &["import", "huge.npy", "huge.vds", "--codec", "bounded:1%"], 1);
    assert!(e.contains("huge.npy: variable \"huge\": --codec bounded:1% of its value range") && e.contains("1e300"), "{e}");
    assert!(!dir.join("huge.vds").exists());
}

/// `--codec bounded:P%` on copy, and the errors of both commands: a
/// malformed or out-of-range percentage, and only integer variables.
#[test]
fn copy_with_a_relative_tolerance_and_its_errors() {
    let dir = scratch("relative-copy");
    let (path, want) = known(&dir);
    let p = path.to_str().unwrap();
    let want: Vec<f64> = want.into_iter().map(f64::from).collect();
    let (lo, hi) = finite_range(want.iter().copied());
    ok(&dir, &["copy", p, "rel.vds", "--codec", "bounded:0.5%"]);
    let info = ok(&dir, &["info", "rel.vds"]);
    assert_eq!(shown_tolerance(&info, "amp"), 0.005 * (hi - lo), "{info}");
    let got: Vec<f32> =
        Dataset::open(dir.join("rel.vds")).unwrap().read_vec("amp", &Region::full(&[16, 16, 8]).unwrap(), Order::C).unwrap();
    within(&got.into_iter().map(f64::from).collect::<Vec<_>>(), &want, 0.005 * (hi - lo), "amp");

    for bad in ["bounded:abc%", "bounded:0%", "bounded:-1%", "bounded:101%", "bounded:%", "bounded:nan%", "bounded:inf%", "bounded:1%%"] {
        for args in [&["copy", p, "b.vds", "--codec", bad][..], &["import", &fixture("float32_3d.npy"), "b.vds", "--codec", bad][..]] {
            let e = fails(&dir, args, 2);
            assert!(e.contains(&format!("--codec {bad:?}")) && e.contains("is not a percentage in (0, 100]"), "{bad}: {e}");
        }
    }
    // Integers take no bounded codec, so a relative tolerance has nothing to apply to.
    let e = fails(&dir, &["import", &fixture("int16.npy"), "b.vds", "--codec", "bounded:1%"], 2);
    assert!(
        e.contains("--codec bounded:1%: a relative tolerance is for float32 and float64 variables") && e.contains("\"int16\" is int16"),
        "{e}"
    );
    ok(&dir, &["import", &fixture("int16.npy"), "int.vds"]);
    let e = fails(&dir, &["copy", "int.vds", "b.vds", "--codec", "bounded:1%"], 2);
    assert!(e.contains("a relative tolerance is for float32 and float64 variables"), "{e}");
    assert!(!dir.join("b.vds").exists());
    let help = ok(&dir, &["import", "--help"]) + &ok(&dir, &["copy", "--help"]);
    assert_eq!(help.matches("bounded:TOL|bounded:P%").count(), 2, "{help}");
}
