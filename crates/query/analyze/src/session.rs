//! A DataFusion session bound to one or more datasets: the tables
//! `packets`, `stats`, `stack` and the view `flows`, restricted to a time
//! window.

use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::datasource::MemTable;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::prelude::{SessionConfig, SessionContext};
use store::manifest::Manifest;
use util::storage::Root;

use crate::error::AnalyzeError;
use crate::udf;
pub use crate::window::TimeWindow;

/// What a query's Parquet scans read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanReport {
    /// Bytes of Parquet read from the files.
    pub bytes_scanned: u64,
    /// Row groups skipped by their statistics, and read.
    pub row_groups_pruned: u64,
    pub row_groups_read: u64,
}

/// Asked while a query runs (every few tens of ms): `Some(why)` stops it
/// ([`AnalyzeError::Interrupted`]): a time limit, a client gone away.
pub type Interrupt = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// How often a running query asks its [`Interrupt`].
const INTERRUPT_EVERY: std::time::Duration = std::time::Duration::from_millis(25);

/// A read-only statement's result: at most the rows asked for.
pub struct LimitedResult {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    /// Whether the statement had more rows than were kept.
    pub truncated: bool,
}

/// One or more datasets, open for queries.
pub struct Session {
    ctx: SessionContext,
    runtime: tokio::runtime::Runtime,
    manifests: Vec<(Root, Manifest)>,
    window: TimeWindow,
    /// A tcpdump filter the packets table is restricted to.
    filter: Option<String>,
    /// That filter as the SQL condition `packets` applies.
    filter_sql: Option<String>,
    threads: usize,
    interrupt: Option<Interrupt>,
}

impl Session {
    /// Opens `datasets` as one: their packet files form the table `packets`,
    /// their stats files `stats`, their host-stack events `stack`, their RPC
    /// transactions `rpc` and NFS operations `nfs`, all seen
    /// through `window`; `filter`
    /// (tcpdump syntax) restricts `packets` further. `threads` is the number
    /// of cores to use (0: all). A root is a directory or a prefix of an
    /// object store; one holding datasets below it stands for all of them
    /// ([`store::location::datasets_under`]).
    pub fn open(
        datasets: &[Root],
        window: TimeWindow,
        filter: Option<&str>,
        threads: usize,
    ) -> Result<Session, AnalyzeError> {
        if datasets.is_empty() {
            return Err(AnalyzeError::Usage("give at least one dataset".into()));
        }
        let mut manifests = Vec::new();
        for root in datasets {
            for d in store::location::datasets_under(root)? {
                manifests.push((d.root, d.manifest));
            }
        }
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            threads
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("weir-sql")
            .enable_all()
            .build()
            .map_err(|e| AnalyzeError::Engine(format!("starting the query runtime: {e}")))?;
        let config = SessionConfig::new()
            .with_target_partitions(threads)
            .with_information_schema(true);
        let ctx = SessionContext::new_with_config(config);
        udf::register(&ctx);
        let mut session = Session {
            ctx,
            runtime,
            manifests,
            window,
            filter: filter.map(str::to_string),
            filter_sql: None,
            threads,
            interrupt: None,
        };
        session.filter_sql = session.bind()?;
        Ok(session)
    }

    /// Each dataset's root and manifest (a prefix holding several
    /// datasets gives each of them).
    pub fn manifests(&self) -> &[(Root, Manifest)] {
        &self.manifests
    }

    pub fn window(&self) -> TimeWindow {
        self.window
    }

    /// The tcpdump filter the packets table is restricted to.
    pub fn filter(&self) -> Option<&str> {
        self.filter.as_deref()
    }

    /// The filter as the SQL condition on the packet records that
    /// `packets` applies (`crate::filter::to_sql`, knowing whether the
    /// records in the window hold tunnelled frames).
    pub fn filter_sql(&self) -> Option<&str> {
        self.filter_sql.as_deref()
    }

    /// Whether any packet record in the window is of a tunnelled frame
    /// (records written before the tunnel columns hold none). Row groups
    /// whose `tunnel_depth` statistics say 0 are not read.
    pub fn holds_tunnels(&self) -> Result<bool, AnalyzeError> {
        let schema = self.plan_schema("SELECT * FROM packet_files")?;
        if schema.field_with_name("tunnel_depth").is_err() {
            return Ok(false);
        }
        let found = self.query(&format!(
            "SELECT 1 FROM packet_files WHERE {} AND tunnel_depth > 0 LIMIT 1",
            self.window.condition()
        ))?;
        Ok(found.iter().any(|b| b.num_rows() > 0))
    }

    /// The first and last frame's time of the datasets, from the manifests
    /// (no scan), whatever the window.
    pub fn data_span_ns(&self) -> Option<(i64, i64)> {
        let mut span: Option<(i64, i64)> = None;
        for (_, m) in &self.manifests {
            if let Some(t) = &m.time_span {
                span = Some(match span {
                    None => (t.first_ns, t.last_ns),
                    Some((a, b)) => (a.min(t.first_ns), b.max(t.last_ns)),
                });
            }
        }
        span
    }

    /// The time span of the data in the window, from the manifests (no scan).
    pub fn span_ns(&self) -> Option<(i64, i64)> {
        let (mut a, mut b) = self.data_span_ns()?;
        if let Some(f) = self.window.from_ns {
            a = a.max(f);
        }
        if let Some(t) = self.window.to_ns {
            b = b.min(t - 1);
        }
        (a <= b).then_some((a, b))
    }

    /// Makes every later query of this session stop, with
    /// [`AnalyzeError::Interrupted`], once `interrupt` says why.
    pub fn set_interrupt(&mut self, interrupt: Interrupt) {
        self.interrupt = Some(interrupt);
    }

    /// Runs a query's future to its end, or until the interrupt stops it
    /// (the task is aborted: DataFusion drops its streams and stops reading).
    fn run<T: Send + 'static>(
        &self,
        fut: impl std::future::Future<Output = Result<T, AnalyzeError>> + Send + 'static,
    ) -> Result<T, AnalyzeError> {
        let Some(interrupt) = &self.interrupt else {
            return self.runtime.block_on(fut);
        };
        if let Some(why) = interrupt() {
            return Err(AnalyzeError::Interrupted(why));
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let task = self.runtime.spawn(async move {
            let _ = tx.send(fut.await);
        });
        loop {
            match rx.recv_timeout(INTERRUPT_EVERY) {
                Ok(r) => return r,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if let Some(why) = interrupt() {
                        task.abort();
                        return Err(AnalyzeError::Interrupted(why));
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(AnalyzeError::Engine("the query's task failed".into()));
                }
            }
        }
    }

    /// Runs one SQL statement and collects its result.
    pub fn query(&self, sql: &str) -> Result<Vec<RecordBatch>, AnalyzeError> {
        let (ctx, sql) = (self.ctx.clone(), sql.to_string());
        self.run(async move {
            let df = ctx.sql(&sql).await.map_err(AnalyzeError::from_sql)?;
            df.collect().await.map_err(AnalyzeError::from_sql)
        })
    }

    /// Runs a statement and returns its result's schema with the batches
    /// (the schema is there even when no row is).
    pub fn query_with_schema(
        &self,
        sql: &str,
    ) -> Result<(SchemaRef, Vec<RecordBatch>), AnalyzeError> {
        let (ctx, sql) = (self.ctx.clone(), sql.to_string());
        self.run(async move {
            let df = ctx.sql(&sql).await.map_err(AnalyzeError::from_sql)?;
            let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
            let batches = df.collect().await.map_err(AnalyzeError::from_sql)?;
            Ok((schema, batches))
        })
    }

    /// Runs one statement that may only read (a query: no DDL, no DML or
    /// COPY, no SET or other statements) and keeps its first `max_rows` rows.
    pub fn query_read_only(
        &self,
        sql: &str,
        max_rows: usize,
    ) -> Result<LimitedResult, AnalyzeError> {
        use datafusion::prelude::SQLOptions;
        let (ctx, sql) = (self.ctx.clone(), sql.to_string());
        let options = SQLOptions::new()
            .with_allow_ddl(false)
            .with_allow_dml(false)
            .with_allow_statements(false);
        self.run(async move {
            let df = ctx.sql_with_options(&sql, options).await.map_err(|e| {
                match AnalyzeError::from_sql(e) {
                    AnalyzeError::Sql(m) if m.contains("not supported") => {
                        AnalyzeError::Sql(format!(
                            "{m}; only queries run here (SELECT, WITH, EXPLAIN): the datasets are \
                         read-only"
                        ))
                    }
                    other => other,
                }
            })?;
            let schema: SchemaRef = Arc::new(df.schema().as_arrow().clone());
            let df = df
                .limit(0, Some(max_rows.saturating_add(1)))
                .map_err(AnalyzeError::from_sql)?;
            let mut batches = df.collect().await.map_err(AnalyzeError::from_sql)?;
            let mut left = max_rows;
            let mut truncated = false;
            for b in &mut batches {
                if b.num_rows() > left {
                    *b = b.slice(0, left);
                    truncated = true;
                }
                left -= b.num_rows();
            }
            batches.retain(|b| b.num_rows() > 0);
            Ok(LimitedResult {
                schema,
                batches,
                truncated,
            })
        })
    }

    /// The schema a statement's result would have, planned without running it.
    pub fn plan_schema(&self, sql: &str) -> Result<SchemaRef, AnalyzeError> {
        self.runtime.block_on(async {
            let df = self.ctx.sql(sql).await.map_err(AnalyzeError::from_sql)?;
            Ok(Arc::new(df.schema().as_arrow().clone()) as SchemaRef)
        })
    }

    /// Cores queries run on.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Makes `batches` queryable as the table `name` (replacing any).
    pub fn register_batches(
        &self,
        name: &str,
        batches: Vec<RecordBatch>,
    ) -> Result<(), AnalyzeError> {
        let Some(schema) = batches.first().map(|b| b.schema()) else {
            return Err(AnalyzeError::Engine(format!("no rows for table {name}")));
        };
        let table = MemTable::try_new(schema, vec![batches]).map_err(AnalyzeError::from_sql)?;
        self.deregister(name)?;
        self.ctx
            .register_table(name, Arc::new(table))
            .map_err(AnalyzeError::from_sql)?;
        Ok(())
    }

    pub fn deregister(&self, name: &str) -> Result<(), AnalyzeError> {
        self.ctx
            .deregister_table(name)
            .map_err(AnalyzeError::from_sql)?;
        Ok(())
    }

    /// Runs a query and also reports what its Parquet scans read.
    pub fn query_with_scan(
        &self,
        sql: &str,
    ) -> Result<(Vec<RecordBatch>, ScanReport), AnalyzeError> {
        use datafusion::physical_plan::metrics::MetricValue;
        use datafusion::physical_plan::{ExecutionPlan, collect};
        let (ctx, sql) = (self.ctx.clone(), sql.to_string());
        self.run(async move {
            let df = ctx.sql(&sql).await.map_err(AnalyzeError::from_sql)?;
            let plan = df
                .create_physical_plan()
                .await
                .map_err(AnalyzeError::from_sql)?;
            let batches = collect(plan.clone(), ctx.task_ctx())
                .await
                .map_err(AnalyzeError::from_sql)?;
            let mut report = ScanReport::default();
            let mut stack: Vec<Arc<dyn ExecutionPlan>> = vec![plan];
            while let Some(p) = stack.pop() {
                if let Some(m) = p.metrics() {
                    for metric in m.iter() {
                        match metric.value() {
                            MetricValue::Count { name, count } if name == "bytes_scanned" => {
                                report.bytes_scanned += count.value() as u64;
                            }
                            MetricValue::PruningMetrics {
                                name,
                                pruning_metrics,
                            } if name == "row_groups_pruned_statistics" => {
                                report.row_groups_pruned += pruning_metrics.pruned() as u64;
                                report.row_groups_read += pruning_metrics.matched() as u64;
                            }
                            _ => {}
                        }
                    }
                }
                stack.extend(p.children().into_iter().cloned());
            }
            Ok((batches, report))
        })
    }

    fn execute(&self, sql: &str) -> Result<(), AnalyzeError> {
        self.query(sql).map(|_| ())
    }

    /// Registers the files and the views over them; returns the filter's
    /// SQL condition.
    fn bind(&self) -> Result<Option<String>, AnalyzeError> {
        crate::remote::register_stores(&self.ctx, &self.manifests)?;
        let roots = &self.manifests;
        self.register_files(
            "packet_files",
            roots,
            store::dataset::PACKETS_DIR,
            store::packet_schema(),
            false,
        )?;
        // The other tables are read with their current schema, so that
        // files written before a column was added read it as null.
        let tables = [
            (
                "stats",
                store::dataset::STATS_DIR,
                store::stats::stats_schema(),
            ),
            (
                "stack",
                store::stack::STACK_DIR,
                store::stack::stack_schema(),
            ),
            (
                "stack_intervals",
                store::stack_intervals::INTERVALS_DIR,
                store::stack_intervals::interval_schema(),
            ),
            ("rpc", store::rpc::RPC_DIR, store::rpc::rpc_schema()),
            ("nfs", store::rpc::NFS_DIR, store::rpc::nfs_schema()),
            ("dns", store::app::DNS_DIR, store::app::dns_schema()),
            ("tls", store::app::TLS_DIR, store::app::tls_schema()),
            ("http", store::app::HTTP_DIR, store::app::http_schema()),
        ];
        for (name, dir, schema) in &tables {
            self.register_files(&format!("{name}_files"), roots, dir, schema.clone(), true)?;
        }
        let cond = self.window.condition();
        let (filter_sql, flows) = match &self.filter {
            Some(f) => {
                let tunnelled = crate::filter::depends_on_tunnels(f) && self.holds_tunnels()?;
                let parsed = crate::filter::parse(f, tunnelled)?;
                // The flows the filter may match, as a condition on
                // `flow_hash` that the packet files' page index answers.
                // (Read from local datasets; one in an object store goes
                // without.)
                let dirs: Option<Vec<&std::path::Path>> =
                    roots.iter().map(|(r, _)| r.local_dir()).collect();
                let flows = match dirs {
                    Some(dirs) => crate::index::hash_condition(&dirs, &parsed, &self.window)?,
                    None => None,
                };
                (Some(parsed.sql), flows)
            }
            None => (None, None),
        };
        let filter = filter_sql.as_deref().unwrap_or("TRUE");
        let flows = flows.as_deref().unwrap_or("TRUE");
        self.execute(&format!(
            "CREATE VIEW packets AS SELECT *, CAST(ts AS BIGINT) AS ts_ns \
             FROM packet_files WHERE {cond} AND {filter} AND {flows}"
        ))?;
        for (t, _, _) in &tables {
            self.execute(&format!(
                "CREATE VIEW {t} AS SELECT *, CAST(ts AS BIGINT) AS ts_ns \
                 FROM {t}_files WHERE {cond}"
            ))?;
        }
        self.execute(&format!("CREATE VIEW flows AS {}", crate::sql::flows_sql()))?;
        // The flows table as written (slices, not merged flows), with its
        // times (stored as offsets from each slice's first frame) absolute.
        self.register_files(
            "flow_slice_files",
            roots,
            store::flows::FLOWS_DIR,
            store::flows::flows_schema(),
            true,
        )?;
        let mut absolute = vec!["first_ns + span_ns AS last_ns".to_string()];
        for side in ["a", "b"] {
            for t in ["first", "last", "syn", "synack", "ack"] {
                absolute.push(format!("first_ns + {side}_{t}_after_ns AS {side}_{t}_ns"));
            }
        }
        self.execute(&format!(
            "CREATE VIEW flow_slices AS SELECT *, {} FROM flow_slice_files",
            absolute.join(", ")
        ))?;
        Ok(filter_sql)
    }

    /// A table over the Parquet files in `sub` of every dataset; an empty
    /// table of `schema` when there are none (a conversion has no stats).
    /// With `fixed`, the files are read as `schema` (columns they lack are
    /// null) instead of with the schema found in them.
    fn register_files(
        &self,
        name: &str,
        roots: &[(Root, Manifest)],
        sub: &str,
        schema: SchemaRef,
        fixed: bool,
    ) -> Result<(), AnalyzeError> {
        let mut urls = Vec::new();
        for (root, manifest) in roots {
            let Some(root) = root.local_dir() else {
                // In an object store: the files the manifest names.
                for url in crate::remote::table_urls(&**root, manifest, sub)? {
                    urls.push(ListingTableUrl::parse(&url).map_err(AnalyzeError::from_sql)?);
                }
                continue;
            };
            let dir = root.join(sub);
            if has_parquet_files(&dir) {
                let abs = std::fs::canonicalize(&dir).map_err(|e| AnalyzeError::Io {
                    path: dir.clone(),
                    source: e,
                })?;
                let text = format!("{}/", abs.display());
                urls.push(ListingTableUrl::parse(&text).map_err(AnalyzeError::from_sql)?);
            }
        }
        if urls.is_empty() {
            let table = MemTable::try_new(schema, vec![vec![]]).map_err(AnalyzeError::from_sql)?;
            self.ctx
                .register_table(name, Arc::new(table))
                .map_err(AnalyzeError::from_sql)?;
            return Ok(());
        }
        let options =
            ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
        let table = self.runtime.block_on(async {
            let config =
                ListingTableConfig::new_with_multi_paths(urls).with_listing_options(options);
            let config = if fixed {
                config.with_schema(schema)
            } else {
                config.infer_schema(&self.ctx.state()).await?
            };
            ListingTable::try_new(config)
        });
        let table = table.map_err(AnalyzeError::from_sql)?;
        self.ctx
            .register_table(name, Arc::new(table))
            .map_err(AnalyzeError::from_sql)?;
        Ok(())
    }
}

fn has_parquet_files(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|rd| {
        rd.flatten()
            .any(|e| e.path().extension().is_some_and(|x| x == "parquet"))
    })
}
