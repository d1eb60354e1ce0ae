//! Plots of `rates`, `bursts`, `loss`, `stack` and `rpc` as SVG or PNG,
//! from what the engine answered for a plot ([`analyze::answer::Plot`]).
//!
//! Every figure is titled with what it shows and the span it covers;
//! time axes count seconds from the first frame of that span and end
//! with it; a logarithmic axis labels only the values it can hold (no
//! zero); dropped frames are shaded where they happened.

use std::collections::BTreeMap;
use std::path::Path;

use analyze::answer::Plot;
use analyze::{AnalyzeError, BurstScale, Table};
use util::fmt::short_duration;

use crate::figure::{
    Figure, MAX_C, MEAN_C, MIN_C, PALETTE, SECONDS_AXIS, against, column, drop_windows, panel,
    save, seconds, span_range, steps, title,
};

/// Draws `plot` into `path` (.svg or .png).
pub fn draw(plot: &Plot, path: &Path) -> Result<(), AnalyzeError> {
    match plot {
        Plot::Loss { table, span } => loss(table, *span, path),
        Plot::Rates {
            table,
            loss,
            every_ns,
            span,
        } => rates(table, loss, *every_ns, *span, path),
        Plot::Bursts { scales, span } => bursts(scales, *span, path),
        Plot::Rpc { samples, span } => rpc(samples, *span, path),
        Plot::Stack {
            tcp,
            delay_samples,
            span,
        } => stack(tcp, delay_samples, *span, path),
    }
}

/// `rates`: frames/s and bits/s per window (least, mean, greatest) as
/// steps over seconds from the span's first frame (an empty window is a
/// step at zero), the axis ending with the span, with the windows where
/// frames were dropped (`loss`, from the stats table) shaded, so that
/// loss is not read as silence.
pub fn rates(
    table: &Table,
    loss: &Table,
    every_ns: i64,
    span: Option<(i64, i64)>,
    path: &Path,
) -> Result<(), AnalyzeError> {
    save(path, &rates_figure(table, loss, every_ns, span)?)
}

fn rates_figure(
    table: &Table,
    loss: &Table,
    every_ns: i64,
    span: Option<(i64, i64)>,
) -> Result<Figure, AnalyzeError> {
    let x_desc = SECONDS_AXIS;
    let t0 = span.map(|s| s.0);
    let range = span_range(span);
    let drops: Vec<(f64, f64)> = drop_windows(table, loss, every_ns, t0)?
        .into_iter()
        .map(|(a, b)| match range {
            Some((lo, hi)) => (a.clamp(lo, hi), b.clamp(lo, hi)),
            None => (a, b),
        })
        .collect();
    let mut panels = Vec::new();
    for (unit, title, y) in [
        ("fps", "frames per second", "frames/s"),
        ("bps", "bits per second", "bits/s"),
    ] {
        let mut p = panel(title, x_desc, y, (false, false));
        p.x_range = range;
        for (k, name, color) in [
            ("max", "greatest sample", MAX_C),
            ("mean", "mean", MEAN_C),
            ("min", "least sample", MIN_C),
        ] {
            p.series.push((
                name.into(),
                color,
                steps(table, &format!("{k}_{unit}"), every_ns, t0, range)?,
            ));
        }
        if !drops.is_empty() {
            p.bands = Some(("frames dropped (stats)".into(), drops.clone()));
        }
        panels.push(p);
    }
    Ok(Figure {
        title: title(
            &format!(
                "Rates per {} window ({} samples)",
                short_duration(every_ns),
                short_duration(every_ns / samples_per_window(table)),
            ),
            span,
        ),
        grid: (2, 1),
        panels,
    })
}

/// Samples per window: the most any window of the table has (1 when the
/// table has none).
fn samples_per_window(table: &Table) -> i64 {
    column(table, "samples")
        .ok()
        .and_then(|v| v.iter().copied().filter(|x| x.is_finite()).reduce(f64::max))
        .map_or(1, |m| (m as i64).max(1))
}

/// `bursts`: for each time scale, the share of intervals whose rate is
/// higher than x (log-log CCDF).
pub fn bursts(
    scales: &[BurstScale],
    span: Option<(i64, i64)>,
    path: &Path,
) -> Result<(), AnalyzeError> {
    save(path, &bursts_figure(scales, span))
}

fn bursts_figure(scales: &[BurstScale], span: Option<(i64, i64)>) -> Figure {
    let y = "share of intervals with a higher rate";
    let mut fps = panel(
        "frame rate, by interval length",
        "frames/s",
        y,
        (true, true),
    );
    let mut bps = panel("bit rate, by interval length", "bits/s", y, (true, true));
    for (k, s) in scales.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        fps.series
            .push((short_duration(s.scale_ns), color, s.ccdf_fps.clone()));
        bps.series
            .push((short_duration(s.scale_ns), color, s.ccdf_bps.clone()));
    }
    Figure {
        title: title("Bursts: rates over intervals of each length", span),
        grid: (1, 2),
        panels: vec![fps, bps],
    }
}

/// `loss`: per second, frames seen, captured and dropped by each stage,
/// the seconds with drops shaded.
pub fn loss(table: &Table, span: Option<(i64, i64)>, path: &Path) -> Result<(), AnalyzeError> {
    save(path, &loss_figure(table, span)?)
}

fn loss_figure(table: &Table, span: Option<(i64, i64)>) -> Result<Figure, AnalyzeError> {
    let x = seconds(table, span.map(|s| s.0))?;
    let mut p = panel(
        "frames per second by stage",
        SECONDS_AXIS,
        "frames/s",
        (false, false),
    );
    let mut dropped = vec![0.0; x.len()];
    for k in ["kernel_drops", "pcap_drops"] {
        for (d, v) in dropped.iter_mut().zip(column(table, k)?) {
            *d += if v.is_finite() { v } else { 0.0 };
        }
    }
    let drop_seconds: Vec<(f64, f64)> = x
        .iter()
        .zip(&dropped)
        .filter(|(_, d)| **d > 0.0)
        .map(|(&x, _)| (x, x + 1.0))
        .collect();
    if !drop_seconds.is_empty() {
        p.bands = Some(("seconds with drops".into(), drop_seconds));
    }
    for (k, name, color) in [
        ("kernel_seen", "seen by the kernel", PALETTE[0]),
        ("captured", "captured", PALETTE[2]),
        ("kernel_drops", "dropped: ring full", PALETTE[3]),
        ("pcap_drops", "dropped: pcap staging full", PALETTE[1]),
    ] {
        p.series
            .push((name.into(), color, against(&x, column(table, k)?)));
    }
    let mut panels = vec![p];
    // With compressed pcap: the level the writers chose, and how fast
    // bytes went to disk (driverdump's Figure 4).
    let level = column(table, "pcap_level").unwrap_or_default();
    if level.iter().any(|l| l.is_finite()) {
        let mut c = panel(
            "pcap compression: level chosen (0 = stored) and MB/s written",
            SECONDS_AXIS,
            "zstd level / MB/s ÷ 100",
            (false, false),
        );
        c.series
            .push(("zstd level".into(), PALETTE[0], against(&x, level)));
        let stored = column(table, "pcap_stored_bytes")?;
        c.series.push((
            "MB/s to disk ÷ 100".into(),
            PALETTE[2],
            against(&x, stored.iter().map(|b| b / 1e8).collect()),
        ));
        panels.push(c);
    }
    Ok(Figure {
        title: title("Capture: frames seen, captured and dropped", span),
        grid: (panels.len(), 1),
        panels,
    })
}

/// The CCDF of sorted ns samples: (value in µs, share of samples above it).
/// A log axis has no zero: values under 1 µs are drawn at 1 µs.
fn ccdf_us(sorted: &[i64]) -> Vec<(f64, f64)> {
    let n = sorted.len() as f64;
    let mut points = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j < sorted.len() && sorted[j] == sorted[i] {
            j += 1;
        }
        points.push((
            (sorted[i] as f64 / 1e3).max(1.0),
            (sorted.len() - j) as f64 / n,
        ));
        i = j;
    }
    points.retain(|p| p.1 > 0.0);
    points
}

/// `rpc --plot`: the latency CCDF of the busiest procedures.
pub fn rpc(
    samples: &BTreeMap<String, Vec<i64>>,
    span: Option<(i64, i64)>,
    path: &Path,
) -> Result<(), AnalyzeError> {
    let mut latency = panel(
        "RPC response time (reply - call)",
        "latency, µs",
        "share of calls that took longer",
        (true, true),
    );
    let mut busiest: Vec<(&String, &Vec<i64>)> = samples.iter().collect();
    busiest.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
    for (k, (label, v)) in busiest.iter().take(PALETTE.len()).enumerate() {
        latency.series.push((
            format!("{label} ({} calls)", v.len()),
            PALETTE[k % PALETTE.len()],
            ccdf_us(v),
        ));
    }
    save(
        path,
        &Figure {
            title: title("RPC: response times of the busiest procedures", span),
            grid: (1, 1),
            panels: vec![latency],
        },
    )
}

/// `stack`: congestion window and smoothed RTT over time of the busiest
/// sockets (from tcp_probe, the table `tcp`), and for each the
/// distribution of how long application writes waited before the device
/// sent them (CCDF).
pub fn stack(
    tcp: &Table,
    delay_samples: &BTreeMap<u64, Vec<i64>>,
    span: Option<(i64, i64)>,
    path: &Path,
) -> Result<(), AnalyzeError> {
    let x_desc = "time, s after the first event";
    let mut cwnd = panel(
        "congestion window (segments)",
        x_desc,
        "snd_cwnd",
        (false, false),
    );
    let mut rtt = panel("smoothed RTT", x_desc, "srtt, µs", (false, false));
    cwnd.y_desc = "snd_cwnd, segments".into();
    let mut delay = panel(
        "application write to device transmit",
        "delay, µs",
        "share of writes that waited longer",
        (true, true),
    );
    if tcp.rows() > 0 {
        let cookies = column(tcp, "cookie")?;
        let ts = column(tcp, "ts_ns")?;
        let cw = column(tcp, "snd_cwnd")?;
        let rt = column(tcp, "srtt_us")?;
        let t0 = ts.iter().copied().fold(f64::INFINITY, f64::min);
        let mut order: Vec<u64> = Vec::new();
        for c in &cookies {
            if !order.contains(&(*c as u64)) {
                order.push(*c as u64);
            }
        }
        for (k, c) in order.iter().enumerate() {
            let color = PALETTE[k % PALETTE.len()];
            let pick = |v: &[f64]| -> Vec<(f64, f64)> {
                (0..v.len())
                    .filter(|&i| cookies[i] as u64 == *c)
                    .map(|i| ((ts[i] - t0) / 1e9, v[i]))
                    .collect()
            };
            let name = format!("socket {c}");
            cwnd.series.push((name.clone(), color, pick(&cw)));
            rtt.series.push((name, color, pick(&rt)));
        }
    }
    for (k, (c, v)) in delay_samples.iter().enumerate().take(PALETTE.len()) {
        delay.series.push((
            format!("socket {c}"),
            PALETTE[k % PALETTE.len()],
            ccdf_us(v),
        ));
    }
    save(
        path,
        &Figure {
            title: title(
                "Stack: TCP state and send delays of the busiest sockets",
                span,
            ),
            grid: (3, 1),
            panels: vec![cwnd, rtt, delay],
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::{SIZE, axis_label, draw_figure};
    use analyze::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, UInt64Array};
    use analyze::arrow::datatypes::{Field, Schema};
    use plotters::prelude::*;
    use std::sync::Arc;

    fn table(cols: Vec<(&str, ArrayRef)>) -> Table {
        let schema = Arc::new(Schema::new(
            cols.iter()
                .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
                .collect::<Vec<_>>(),
        ));
        let batch =
            RecordBatch::try_new(schema.clone(), cols.into_iter().map(|c| c.1).collect()).unwrap();
        Table {
            name: "t".into(),
            schema,
            batches: vec![batch],
        }
    }

    #[test]
    fn rates_are_steps_and_drops_mark_their_windows() {
        const S: i64 = 1_000_000_000;
        let rates = table(vec![
            (
                "start_ns",
                Arc::new(Int64Array::from(vec![10 * S, 12 * S, 14 * S])),
            ),
            (
                "mean_fps",
                Arc::new(Float64Array::from(vec![5.0, 0.0, 7.0])),
            ),
        ]);
        assert_eq!(
            steps(&rates, "mean_fps", 2 * S, None, None).unwrap(),
            vec![
                (0.0, 5.0),
                (2.0, 5.0),
                (2.0, 0.0),
                (4.0, 0.0),
                (4.0, 7.0),
                (6.0, 7.0)
            ]
        );
        // Drops in the second from 13 s (the window from 12 s), none at 10 s.
        let loss = table(vec![
            ("start_ns", Arc::new(Int64Array::from(vec![10 * S, 13 * S]))),
            ("kernel_drops", Arc::new(UInt64Array::from(vec![0, 0]))),
            ("pcap_drops", Arc::new(UInt64Array::from(vec![0, 3]))),
        ]);
        assert_eq!(
            drop_windows(&rates, &loss, 2 * S, None).unwrap(),
            vec![(2.0, 4.0)]
        );
        // From the span's first frame at 11 s, cut to the span's 4 s.
        assert_eq!(
            steps(&rates, "mean_fps", 2 * S, Some(11 * S), Some((0.0, 4.0))).unwrap()[..2],
            [(0.0, 5.0), (1.0, 5.0)]
        );
        assert_eq!(
            drop_windows(&rates, &loss, 2 * S, Some(11 * S)).unwrap(),
            vec![(1.0, 3.0)]
        );
    }

    /// A rates figure over 4 s from 11 s with frames dropped in the
    /// second from 13 s, drawn as PNG and into memory.
    #[test]
    fn rates_png_has_its_size_title_lines_and_drops_where_they_were() {
        const S: i64 = 1_000_000_000;
        let starts: Vec<i64> = (0..9).map(|k| 10 * S + k * S / 2).collect();
        let f = |v: f64| -> ArrayRef { Arc::new(Float64Array::from(vec![v; 9])) };
        let rates = table(vec![
            ("start_ns", Arc::new(Int64Array::from(starts))),
            ("samples", Arc::new(Int64Array::from(vec![5; 9]))),
            ("min_fps", f(100.0)),
            ("mean_fps", f(200.0)),
            ("max_fps", f(300.0)),
            ("min_bps", f(1e6)),
            ("mean_bps", f(2e6)),
            ("max_bps", f(3e6)),
        ]);
        let loss = table(vec![
            (
                "start_ns",
                Arc::new(Int64Array::from(vec![11 * S, 12 * S, 13 * S, 14 * S])),
            ),
            (
                "kernel_drops",
                Arc::new(UInt64Array::from(vec![0, 0, 7, 0])),
            ),
            ("pcap_drops", Arc::new(UInt64Array::from(vec![0, 0, 0, 0]))),
        ]);
        let span = Some((11 * S, 15 * S));
        let fig = rates_figure(&rates, &loss, S / 2, span).unwrap();
        assert_eq!(
            fig.title,
            "Rates per 500 ms window (100 ms samples): 1970-01-01 00:00:11.000 UTC + 4.000 s"
        );
        // The PNG: its header says 1100 x 760.
        let dir = std::env::temp_dir().join(format!("weir-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let png = dir.join("rates.png");
        save(&png, &fig).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        let be = |o: usize| u32::from_be_bytes(bytes[o..o + 4].try_into().unwrap());
        assert_eq!((be(16), be(20)), SIZE);
        // The same figure in memory, pixel by pixel (RGB).
        let (w, h) = (SIZE.0 as usize, SIZE.1 as usize);
        let mut buf = vec![0u8; w * h * 3];
        draw_figure(
            &BitMapBackend::with_buffer(&mut buf, SIZE).into_drawing_area(),
            &fig,
        )
        .unwrap();
        let px = |x: usize, y: usize| {
            let o = (y * w + x) * 3;
            (buf[o], buf[o + 1], buf[o + 2])
        };
        assert_eq!(px(0, 0), (255, 255, 255), "white background");
        // The title: dark text in the top 40 rows.
        let dark = (0..40)
            .flat_map(|y| (0..w).map(move |x| (x, y)))
            .filter(|&(x, y)| {
                let (r, g, b) = px(x, y);
                r < 100 && g < 100 && b < 100
            })
            .count();
        assert!(dark > 200, "{dark} dark pixels in the title band");
        // The greatest sample's line is drawn, in its red.
        let red = (0..h)
            .flat_map(|y| (0..w).map(move |x| (x, y)))
            .filter(|&(x, y)| px(x, y) == (MAX_C.0, MAX_C.1, MAX_C.2))
            .count();
        assert!(red > 500, "{red} red pixels");
        // The shading of the drops: in a row low in the top panel, only
        // between 2 s and 3 s of the 4 s axis (the second from 13 s).
        let band = |(r, g, b): (u8, u8, u8)| {
            r == 255 && (g as i32 - 216).abs() <= 2 && (b as i32 - 182).abs() <= 2
        };
        let y = 40 + (h - 40) / 2 - 70;
        let cols: Vec<usize> = (0..w).filter(|&x| band(px(x, y))).collect();
        assert!(!cols.is_empty(), "no shading in row {y}");
        let (first, last) = (cols[0], cols[cols.len() - 1]);
        // The plot area runs from about 12 + 80 px to w - 12 px.
        let at = |s: f64| 92.0 + (w as f64 - 104.0) * s / 4.0;
        assert!(
            (first as f64 - at(2.0)).abs() < 15.0,
            "{first} vs {}",
            at(2.0)
        );
        assert!(
            (last as f64 - at(3.0)).abs() < 15.0,
            "{last} vs {}",
            at(3.0)
        );
    }

    #[test]
    fn log_axes_label_no_zero() {
        assert_eq!(axis_label(0.001, true), "0.001");
        assert_eq!(axis_label(0.1, true), "0.1");
        assert_eq!(axis_label(1e-7, true), "1e-7");
        assert_eq!(axis_label(1000.0, true), "1 k");
        assert_eq!(axis_label(0.0, false), "0");
    }
}
