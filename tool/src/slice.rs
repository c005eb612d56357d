//! `vds slice`: one plane of a variable as a PNG picture.

use crate::args::{Args, Spec};
use crate::convert::open;
use crate::info::lod_of;
use crate::util::{at, buffer, out, value_f64, Destination, Fail};
use vds::{Order, Region};

pub static SLICE: Spec = Spec {
    name: "slice",
    help: "\
vds slice: save one plane of a variable as a PNG picture

Usage: vds slice FILE VAR --axis K --index I -o PICTURE.png [options]

Fixes axis K (a number counted from 0 among the variable's axes, or an axis
name) at index I. Of the axes left, the first runs across the picture and
the next runs down it (so an inline slice of an inline, crossline, time
volume shows crosslines across and time downwards); any further axes are
taken at index 0 unless --at says otherwise. A 2-D variable needs no --axis.

Values are scaled by robust percentiles: the seismic map (blue, white, red)
is symmetric about zero and clipped at the --clip percentile of |value|; the
grey map spans the (100 - clip) to clip percentiles. Values that are not
finite are drawn black.

Options:
  --axis K             the axis to fix (number or name)
  --index I            the index along it
  --at AXIS=I          the index of a further axis (repeatable)
  --colormap seismic|grey   (default seismic)
  --clip P             percentile for the scale, 50 to 100 (default 99)
  --zoom Z             draw each value as Z x Z pixels, 1 to 16 (default 1)
  --lod N              level of detail (default 0); --index and --at count that level's samples
  -o, --output FILE    the PNG to write
  -f, --force          replace the PNG if it exists

Example:
  vds slice target/demo.vds amplitude --axis inline --index 128 -o inline128.png
",
    values: &["axis", "index", "at", "colormap", "clip", "zoom", "lod", "output"],
    flags: &["force"],
    positional: (2, 2),
};

/// The picture's colours for a value scaled to 0..=1.
fn colour(map: &str, t: f64) -> [u8; 3] {
    let t = t.clamp(0.0, 1.0);
    if map == "grey" {
        let g = (t * 255.0).round() as u8;
        return [g, g, g];
    }
    // matplotlib's "seismic": dark blue, blue, white, red, dark red.
    const STOPS: [(f64, [f64; 3]); 5] =
        [(0.0, [0.0, 0.0, 0.3]), (0.25, [0.0, 0.0, 1.0]), (0.5, [1.0, 1.0, 1.0]), (0.75, [1.0, 0.0, 0.0]), (1.0, [0.5, 0.0, 0.0])];
    let k = STOPS.iter().position(|s| t <= s.0).unwrap_or(4).max(1);
    let ((t0, c0), (t1, c1)) = (STOPS[k - 1], STOPS[k]);
    let f = (t - t0) / (t1 - t0);
    let mut rgb = [0u8; 3];
    for i in 0..3 {
        rgb[i] = ((c0[i] + (c1[i] - c0[i]) * f) * 255.0).round() as u8;
    }
    rgb
}

/// The `p`th percentile (0 to 100) of `v`, which it reorders.
fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let k = (((v.len() - 1) as f64) * p / 100.0).round() as usize;
    *v.select_nth_unstable_by(k, f64::total_cmp).1
}

pub fn slice(args: &Args) -> Result<(), Fail> {
    let (path, name) = (&args.positional[0], &args.positional[1]);
    let output = args.value("output").ok_or_else(|| args.usage("-o PICTURE.png is required".into()))?;
    let map = args.value("colormap").unwrap_or("seismic");
    if map != "seismic" && map != "grey" && map != "gray" {
        return Err(args.usage(format!("--colormap {map:?}: expected seismic or grey")));
    }
    let clip = args
        .parsed("clip", |s| s.parse::<f64>().ok().filter(|p| (50.0..=100.0).contains(p)).ok_or("expected 50 to 100".to_string()))?
        .unwrap_or(99.0);
    let zoom =
        args.parsed("zoom", |s| s.parse::<u64>().ok().filter(|z| (1..=16).contains(z)).ok_or("expected 1 to 16".to_string()))?.unwrap_or(1);
    let ds = open(path)?;
    let var = ds.variable(name.as_str()).map_err(at(path))?;
    let (lod, shape) = lod_of(args, path, var)?;
    let names: Vec<&str> = var.axes().iter().map(|&k| ds.axes()[k].name()).collect();
    let nd = names.len();
    let axis_of = |s: &str| -> Result<usize, Fail> {
        match s.parse::<usize>() {
            Ok(k) if k < nd => Ok(k),
            Ok(k) => Err(Fail::Error(format!("{path}: variable {name:?} has {nd} axes; axis {k} does not exist"))),
            Err(_) => names
                .iter()
                .position(|n| *n == s)
                .ok_or_else(|| Fail::Error(format!("{path}: variable {name:?} has no axis {s:?} (it has {})", names.join(", ")))),
        }
    };
    let mut fixed: Vec<Option<u64>> = vec![None; nd];
    let index = |s: &str| s.parse::<u64>().map_err(|_| args.usage(format!("{s:?} is not an index")));
    match (args.value("axis"), args.value("index")) {
        (Some(a), Some(i)) => fixed[axis_of(a)?] = Some(index(i)?),
        (None, None) if nd == 2 => {}
        _ => return Err(args.usage("give --axis and --index (only a 2-D variable may leave both out)".into())),
    }
    for at_item in args.values("at") {
        let (a, i) = at_item.split_once('=').ok_or_else(|| args.usage(format!("--at {at_item:?}: expected AXIS=INDEX")))?;
        fixed[axis_of(a)?] = Some(index(i)?);
    }
    let free: Vec<usize> = (0..nd).filter(|&k| fixed[k].is_none()).collect();
    if free.len() < 2 {
        return Err(Fail::Error(format!("{path}: variable {name:?} has {nd} axes; a picture needs two that are not fixed")));
    }
    // Axes beyond the first two free ones are taken at 0.
    let (across, down) = (free[0], free[1]);
    let mut start = vec![0u64; nd];
    let mut count = vec![1u64; nd];
    for k in 0..nd {
        if k == across || k == down {
            count[k] = shape[k];
        } else {
            let i = fixed[k].unwrap_or(0);
            if i >= shape[k] {
                return Err(Fail::Error(format!("{path}: index {i} is outside axis {:?} (0 to {})", names[k], shape[k] - 1)));
            }
            start[k] = i;
        }
    }
    let (w, h) = (shape[across], shape[down]);
    let (pw, ph) = (w * zoom, h * zoom);
    if pw.saturating_mul(ph) > 1 << 30 {
        return Err(Fail::Error(format!("{path}: a {pw} x {ph} picture is too large")));
    }
    let esize = var.dtype().size();
    let dtype = var.dtype();
    let mut buf = buffer(w * h * esize as u64)?;
    let region = Region::new(&start, &count).map_err(at(path))?;
    let part = ds.choose_partitioning(name.as_str(), lod, &region).map_err(at(path))?;
    let prefix = if ds.variables().first().is_some_and(|f| f.name() == name) { "" } else { name.as_str() };
    let layer = var.layer_name(lod, part, prefix).unwrap_or_default();
    ds.read_lod_bytes(name.as_str(), lod, Some(part), &region, Order::C, &mut buf).map_err(at(path))?;
    let read = ds.stored_bytes_read();
    let values: Vec<f64> = buf.chunks_exact(esize).map(|b| value_f64(dtype, b)).collect();
    drop(buf);
    let mut finite: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    let (lo, hi) = if map == "seismic" {
        finite.iter_mut().for_each(|x| *x = x.abs());
        let m = percentile(&mut finite, clip);
        let m = if m > 0.0 { m } else { 1.0 };
        (-m, m)
    } else {
        let lo = percentile(&mut finite, 100.0 - clip);
        let hi = percentile(&mut finite, clip);
        (lo, if hi > lo { hi } else { lo + 1.0 })
    };
    // values are in C order of (across, down): value (x, y) is at x * h + y.
    let (pw, ph) = (pw as usize, ph as usize);
    let mut rgb = vec![0u8; pw * ph * 3];
    for py in 0..ph {
        for px in 0..pw {
            let v = values[(px / zoom as usize) * h as usize + py / zoom as usize];
            let c = if v.is_finite() { colour(map, (v - lo) / (hi - lo)) } else { [0, 0, 0] };
            rgb[(py * pw + px) * 3..][..3].copy_from_slice(&c);
        }
    }
    let dest = Destination::new(output, args.flag("force"))?;
    std::fs::write(dest.temp(), crate::png::encode(pw as u32, ph as u32, &rgb)).map_err(at(output))?;
    dest.finish()?;
    // A fixed axis by its index, and at level 0 by its coordinate too where the two differ (inline 1005 at index 4).
    let at_text: Vec<String> = (0..nd)
        .filter(|&k| k != across && k != down)
        .map(|k| {
            let axis = &ds.axes()[var.axes()[k]];
            let n = axis.samples();
            let value = if n > 1 { axis.first() + (axis.last() - axis.first()) * start[k] as f64 / (n - 1) as f64 } else { axis.first() };
            if lod == 0 && value != start[k] as f64 {
                format!("{} index {} ({} {})", names[k], start[k], names[k], short(value))
            } else {
                format!("{} = {}", names[k], start[k])
            }
        })
        .collect();
    let scale = if map == "seismic" {
        format!("seismic map clipped at ±{}", short(hi))
    } else {
        format!("grey map from {} to {}", short(lo), short(hi))
    };
    out(format!(
        "{output}: {pw} x {ph} pixels, {} across, {} down, at {}; {scale}; read {} from layer {layer}\n",
        names[across],
        names[down],
        at_text.join(", "),
        crate::util::size(read)
    )
    .as_bytes())
}

/// A scale bound with four significant digits.
fn short(x: f64) -> String {
    format!("{}", (x * 1e4).round() / 1e4).chars().take(10).collect()
}
