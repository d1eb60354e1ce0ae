//! What every plot is made of: panels of line series in a grid under a
//! title, drawn with plotters into SVG or PNG (text with DejaVu Sans from
//! the system, Debian: fonts-dejavu-core, found at run time); axes,
//! colours, and the columns of a result as points.

use std::path::Path;

use analyze::arrow::array::{Array, AsArray};
use analyze::arrow::datatypes::{
    DataType, Float64Type, Int16Type, Int64Type, UInt32Type, UInt64Type,
};
use plotters::coord::Shift;
use plotters::prelude::*;

use analyze::{AnalyzeError, Table};
use util::fmt::{human_duration, si};

pub(crate) const SIZE: (u32, u32) = (1100, 760);
pub(crate) const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

pub(crate) fn err(e: impl std::fmt::Display) -> AnalyzeError {
    AnalyzeError::Engine(format!("drawing the plot: {e}"))
}

/// A column as numbers (nulls as NaN), by name.
pub(crate) fn column(t: &Table, name: &str) -> Result<Vec<f64>, AnalyzeError> {
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
pub(crate) type Series = (String, RGBColor, Vec<(f64, f64)>);

/// One chart: line series over a shared x axis.
pub(crate) struct Panel {
    pub(crate) title: String,
    pub(crate) x_desc: String,
    pub(crate) y_desc: String,
    /// Logarithmic x and y axes.
    pub(crate) log: (bool, bool),
    pub(crate) series: Vec<Series>,
    /// Stretches of x to shade, and what they mean.
    pub(crate) bands: Option<(String, Vec<(f64, f64)>)>,
    /// The x axis's range when it is not the data's (a time axis: the
    /// span analysed).
    pub(crate) x_range: Option<(f64, f64)>,
}

/// Panels in a grid of (rows, columns), under a title.
pub(crate) struct Figure {
    pub(crate) title: String,
    pub(crate) grid: (usize, usize),
    pub(crate) panels: Vec<Panel>,
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

pub(crate) fn draw_figure<DB: DrawingBackend>(
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
pub(crate) fn save(path: &Path, fig: &Figure) -> Result<(), AnalyzeError> {
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
pub(crate) fn load_font() -> Result<(), AnalyzeError> {
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
pub(crate) fn lines<DB: DrawingBackend>(
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

pub(crate) const MIN_C: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
pub(crate) const MEAN_C: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
pub(crate) const MAX_C: RGBColor = RGBColor(0xd6, 0x27, 0x28);
pub(crate) const DROP_C: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
pub(crate) const PALETTE: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
];

pub(crate) fn panel(title: &str, x: &str, y: &str, log: (bool, bool)) -> Panel {
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
pub(crate) fn axis_label(v: f64, log: bool) -> String {
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
pub(crate) const SECONDS_AXIS: &str = "time, s after the first frame";

/// The time axis's range: the span, in seconds from its first frame.
pub(crate) fn span_range(span: Option<(i64, i64)>) -> Option<(f64, f64)> {
    span.map(|(a, b)| (0.0, ((b - a) as f64 / 1e9).max(1e-6)))
}

/// Seconds from `t0` (the span's first frame; else the column's first
/// value) of the `start_ns` column.
pub(crate) fn seconds(table: &Table, t0: Option<i64>) -> Result<Vec<f64>, AnalyzeError> {
    let t = column(table, "start_ns")?;
    let t0 = t0
        .map(|t| t as f64)
        .unwrap_or_else(|| t.first().copied().unwrap_or(0.0));
    Ok(t.iter().map(|v| (v - t0) / 1e9).collect())
}

pub(crate) fn against(x: &[f64], y: Vec<f64>) -> Vec<(f64, f64)> {
    x.iter().copied().zip(y).collect()
}

/// The rate a column of `table` gives each window of `every_ns`, as steps:
/// the window's value from its start to its end (x in seconds from `t0`,
/// else the first window; cut to `range`), two points a window.
pub(crate) fn steps(
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
pub(crate) fn drop_windows(
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
