//! Plots of `rates`, `bursts`, `loss`, `stack` and `rpc` as SVG or PNG
//! (plotters). Text is laid out (both formats) and drawn (PNG) with DejaVu
//! Sans from the system (Debian: fonts-dejavu-core), found at run time.
//!
//! Every figure is titled with what it shows and the span it covers;
//! time axes count seconds from the first frame of that span and end
//! with it; a logarithmic axis labels only the values it can hold (no
//! zero); dropped frames are shaded where they happened.

use std::path::Path;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{
    DataType, Float64Type, Int16Type, Int64Type, UInt32Type, UInt64Type,
};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::analyses::{BurstScale, Table};
use crate::error::AnalyzeError;
use util::fmt::{human_duration, short_duration, si};

const SIZE: (u32, u32) = (1100, 760);
const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

fn err(e: impl std::fmt::Display) -> AnalyzeError {
    AnalyzeError::Engine(format!("drawing the plot: {e}"))
}

/// A column as numbers (nulls as NaN), by name.
fn column(t: &Table, name: &str) -> Result<Vec<f64>, AnalyzeError> {
    let idx = t
        .schema
        .index_of(name)
        .map_err(|_| AnalyzeError::Engine(format!("the result has no column {name}")))?;
    let mut out = Vec::with_capacity(t.rows());
    for b in &t.batches {
        let a = b.column(idx);
        for i in 0..a.len() {
            out.push(if a.is_null(i) {
                f64::NAN
            } else {
                match a.data_type() {
                    DataType::Float64 => a.as_primitive::<Float64Type>().value(i),
                    DataType::Int64 => a.as_primitive::<Int64Type>().value(i) as f64,
                    DataType::Int16 => a.as_primitive::<Int16Type>().value(i) as f64,
                    DataType::UInt64 => a.as_primitive::<UInt64Type>().value(i) as f64,
                    DataType::UInt32 => a.as_primitive::<UInt32Type>().value(i) as f64,
                    other => {
                        return Err(AnalyzeError::Engine(format!(
                            "column {name} is {other}, not a number"
                        )));
                    }
                }
            });
        }
    }
    Ok(out)
}

/// A named, coloured line: (x, y) points.
type Series = (String, RGBColor, Vec<(f64, f64)>);

/// One chart: line series over a shared x axis.
struct Panel {
    title: String,
    x_desc: String,
    y_desc: String,
    /// Logarithmic x and y axes.
    log: (bool, bool),
    series: Vec<Series>,
    /// Stretches of x to shade, and what they mean.
    bands: Option<(String, Vec<(f64, f64)>)>,
    /// The x axis's range when it is not the data's (a time axis: the
    /// span analysed).
    x_range: Option<(f64, f64)>,
}

/// Panels in a grid of (rows, columns), under a title.
struct Figure {
    title: String,
    grid: (usize, usize),
    panels: Vec<Panel>,
}

/// The title of a figure: what it shows, and over which span (the first
/// frame's time, UTC, and the length).
pub fn title(what: &str, span: Option<(i64, i64)>) -> String {
    match span {
        Some((first, last)) => {
            let t = store::time::format_ns(first);
            // To the millisecond: 2026-01-01 00:00:00.123
            let t = format!("{} {}", &t[..10], &t[11..23]);
            format!("{what}: {t} UTC + {}", human_duration(last - first))
        }
        None => format!("{what} (no frames)"),
    }
}

fn draw_figure<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    fig: &Figure,
) -> Result<(), AnalyzeError>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let root = root
        .titled(&fig.title, ("sans-serif", 22).into_font().color(&BLACK))
        .map_err(err)?;
    for (area, panel) in root.split_evenly(fig.grid).iter().zip(&fig.panels) {
        lines(area, panel)?;
    }
    root.present().map_err(err)
}

/// Writes `fig` as SVG or PNG, chosen by the extension of `path`.
fn save(path: &Path, fig: &Figure) -> Result<(), AnalyzeError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("svg") => {
            load_font()?;
            draw_figure(&SVGBackend::new(path, SIZE).into_drawing_area(), fig)
        }
        Some("png") => {
            load_font()?;
            draw_figure(&BitMapBackend::new(path, SIZE).into_drawing_area(), fig)
        }
        _ => Err(AnalyzeError::Usage(format!(
            "--plot {}: name the file .svg or .png",
            path.display()
        ))),
    }
}

/// Registers DejaVu Sans for PNG text, once.
fn load_font() -> Result<(), AnalyzeError> {
    static LOADED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    LOADED
        .get_or_init(|| {
            let bytes = FONTS
                .iter()
                .find_map(|p| std::fs::read(p).ok())
                .ok_or_else(|| {
                    format!(
                        "plots need the DejaVu Sans font ({}; Debian: apt-get install \
                     fonts-dejavu-core)",
                        FONTS[0]
                    )
                })?;
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| "the DejaVu Sans font file is not a usable font".to_string())
        })
        .clone()
        .map_err(AnalyzeError::Usage)
}

/// A line chart of a panel's series.
fn lines<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
) -> Result<(), AnalyzeError>
where
    DB::ErrorType: 'static,
{
    let Panel {
        title,
        x_desc,
        y_desc,
        log,
        series,
        bands,
        x_range,
    } = panel;
    let log = *log;
    let pts = series.iter().flat_map(|s| s.2.iter()).filter(|p| {
        p.0.is_finite() && p.1.is_finite() && (!log.0 || p.0 > 0.0) && (!log.1 || p.1 > 0.0)
    });
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for p in pts {
        x0 = x0.min(p.0);
        x1 = x1.max(p.0);
        y0 = y0.min(p.1);
        y1 = y1.max(p.1);
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    if let Some((a, b)) = *x_range {
        (x0, x1) = (a, b);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if !log.1 {
        y0 = y0.min(0.0);
    }
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    let mut b = ChartBuilder::on(area);
    b.caption(title.as_str(), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80);
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(x_desc.as_str())
                .y_desc(y_desc.as_str())
                .x_label_formatter(&|v| axis_label(*v, log.0))
                .y_label_formatter(&|v| axis_label(*v, log.1))
                .draw()
                .map_err(err)?;
            if let Some((name, spans)) = bands {
                let fill = DROP_C.mix(0.3).filled();
                chart
                    .draw_series(
                        spans
                            .iter()
                            .map(|&(a, b)| Rectangle::new([(a, y0), (b, y1)], fill)),
                    )
                    .map_err(err)?
                    .label(name.as_str())
                    .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 20, y + 5)], fill));
            }
            for (name, color, data) in series {
                let c = *color;
                chart
                    .draw_series(LineSeries::new(
                        data.iter().copied().filter(|p| {
                            p.0.is_finite()
                                && p.1.is_finite()
                                && (!log.0 || p.0 > 0.0)
                                && (!log.1 || p.1 > 0.0)
                        }),
                        c.stroke_width(2),
                    ))
                    .map_err(err)?
                    .label(name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                    });
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(err)?;
        }};
    }
    match log {
        (false, false) => draw!(b.build_cartesian_2d(x0..x1, y0..y1).map_err(err)?),
        (true, true) => draw!(
            b.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
                .map_err(err)?
        ),
        (false, true) => draw!(
            b.build_cartesian_2d(x0..x1, (y0..y1).log_scale())
                .map_err(err)?
        ),
        (true, false) => draw!(
            b.build_cartesian_2d((x0..x1).log_scale(), y0..y1)
                .map_err(err)?
        ),
    }
    Ok(())
}

const MIN_C: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const MEAN_C: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
const MAX_C: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const DROP_C: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
const PALETTE: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
];

fn panel(title: &str, x: &str, y: &str, log: (bool, bool)) -> Panel {
    Panel {
        title: title.into(),
        x_desc: x.into(),
        y_desc: y.into(),
        log,
        series: Vec::new(),
        bands: None,
        x_range: None,
    }
}

/// A tick's label: SI-prefixed; on a logarithmic axis a value below one
/// keeps its digits (0.001, not "0": a log axis has no zero).
fn axis_label(v: f64, log: bool) -> String {
    if log && v > 0.0 && v < 1.0 {
        let digits = (-v.log10()).ceil() as usize + 1;
        let text = format!("{v:.digits$}");
        let text = text.trim_end_matches('0').trim_end_matches('.');
        return if digits > 5 {
            format!("{v:.0e}")
        } else {
            text.to_string()
        };
    }
    si(v)
}

/// The x axis of time plots: seconds after the span's first frame.
const SECONDS_AXIS: &str = "time, s after the first frame";

/// The time axis's range: the span, in seconds from its first frame.
fn span_range(span: Option<(i64, i64)>) -> Option<(f64, f64)> {
    span.map(|(a, b)| (0.0, ((b - a) as f64 / 1e9).max(1e-6)))
}

/// Seconds from `t0` (the span's first frame; else the column's first
/// value) of the `start_ns` column.
fn seconds(table: &Table, t0: Option<i64>) -> Result<Vec<f64>, AnalyzeError> {
    let t = column(table, "start_ns")?;
    let t0 = t0
        .map(|t| t as f64)
        .unwrap_or_else(|| t.first().copied().unwrap_or(0.0));
    Ok(t.iter().map(|v| (v - t0) / 1e9).collect())
}

fn against(x: &[f64], y: Vec<f64>) -> Vec<(f64, f64)> {
    x.iter().copied().zip(y).collect()
}

/// The rate a column of `table` gives each window of `every_ns`, as steps:
/// the window's value from its start to its end (x in seconds from `t0`,
/// else the first window; cut to `range`), two points a window.
fn steps(
    table: &Table,
    column_name: &str,
    every_ns: i64,
    t0: Option<i64>,
    range: Option<(f64, f64)>,
) -> Result<Vec<(f64, f64)>, AnalyzeError> {
    let x = seconds(table, t0)?;
    let width = every_ns as f64 / 1e9;
    let y = column(table, column_name)?;
    let (lo, hi) = range.unwrap_or((f64::MIN, f64::MAX));
    Ok(x.iter()
        .zip(y)
        .flat_map(|(&x, y)| [(x.clamp(lo, hi), y), ((x + width).clamp(lo, hi), y)])
        .collect())
}

/// The windows of `rates` (x in seconds from `t0`, else the first window,
/// as [`steps`]) in which the stats table (`loss`) counts dropped frames,
/// at any stage.
fn drop_windows(
    rates: &Table,
    loss: &Table,
    every_ns: i64,
    t0: Option<i64>,
) -> Result<Vec<(f64, f64)>, AnalyzeError> {
    let starts = column(rates, "start_ns")?;
    let Some(&first) = starts.first() else {
        return Ok(Vec::new());
    };
    let t0 = t0.map_or(first, |t| t as f64);
    let seconds = column(loss, "start_ns")?;
    let mut dropped = vec![0.0; seconds.len()];
    for k in ["kernel_drops", "pcap_drops"] {
        for (d, v) in dropped.iter_mut().zip(column(loss, k)?) {
            *d += if v.is_finite() { v } else { 0.0 };
        }
    }
    let every = every_ns as f64;
    let mut out: Vec<(f64, f64)> = Vec::new();
    for &start in &starts {
        // A stats row covers the second from its time.
        let lost = seconds
            .iter()
            .zip(&dropped)
            .any(|(&t, &d)| d > 0.0 && t < start + every && t + 1e9 > start);
        if lost {
            let x = (start - t0) / 1e9;
            out.push((x, x + every / 1e9));
        }
    }
    Ok(out)
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

/// `stack`: congestion window and smoothed RTT over time of the busiest
/// sockets (from tcp_probe), and for each the distribution of how long
/// application writes waited before the device sent them (CCDF).
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
    samples: &std::collections::BTreeMap<String, Vec<i64>>,
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

pub fn stack(
    s: &crate::stack::StackAnalysis,
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
    if s.tcp.rows() > 0 {
        let cookies = column(&s.tcp, "cookie")?;
        let ts = column(&s.tcp, "ts_ns")?;
        let cw = column(&s.tcp, "snd_cwnd")?;
        let rt = column(&s.tcp, "srtt_us")?;
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
    for (k, (c, v)) in s.delay_samples.iter().enumerate().take(PALETTE.len()) {
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
    use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, UInt64Array};
    use datafusion::arrow::datatypes::{Field, Schema};
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
