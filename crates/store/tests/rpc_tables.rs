//! The rpc and nfs tables as `RpcWriter` writes them: cut into row groups
//! of `ROW_GROUP_ROWS`, every transaction read back in the order written.

use arrow_array::{Array, UInt32Array, UInt64Array};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::reader::{FileReader, SerializedFileReader};
use rpc::{Call, CallDetail, Op, Transaction};
use store::rpc::{NFS_DIR, ROW_GROUP_ROWS, RPC_DIR, RpcWriter};

/// A READ of 4 KiB at `offset` `i` × 4 KiB, answered 100 µs later: a
/// transaction with one operation.
fn read_call(i: u64) -> Transaction {
    let op = Op {
        op: 6,
        status: Some(0),
        fh: Some(7),
        offset: Some(i * 4096),
        count: Some(4096),
        res_count: Some(4096),
        ..Default::default()
    };
    Transaction {
        call_ts: Some(1_000_000 + i as i64 * 1000),
        last_call_ts: Some(1_000_000 + i as i64 * 1000),
        reply_ts: Some(1_100_000 + i as i64 * 1000),
        client: [10; 16],
        client_port: 800,
        server: [20; 16],
        server_port: 2049,
        proto: rpc::track::TCP,
        xid: i as u32 ^ 0x5a5a,
        call: Some(Call {
            xid: i as u32 ^ 0x5a5a,
            program: 100_003,
            version: 3,
            procedure: 6,
            auth_flavor: 1,
            uid: Some(0),
            gid: Some(0),
            args_at: 0,
        }),
        status: Some(0),
        call_bytes: 132,
        reply_bytes: 4_220,
        detail: CallDetail {
            ops: [op].into_iter().collect(),
            incomplete: false,
        },
        ..Default::default()
    }
}

fn column<A: Array + Clone + 'static>(path: &std::path::Path, name: &str) -> Vec<A> {
    let file = std::fs::File::open(path).unwrap();
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let at = builder.schema().index_of(name).unwrap();
    let mask = parquet::arrow::ProjectionMask::roots(builder.parquet_schema(), [at]);
    builder
        .with_projection(mask)
        .build()
        .unwrap()
        .map(|b| {
            let b = b.unwrap();
            b.column(0).as_any().downcast_ref::<A>().unwrap().clone()
        })
        .collect()
}

#[test]
fn tables_are_cut_into_row_groups_and_read_back_in_order() {
    let root = std::env::temp_dir().join(format!("weir-rpc-tables-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join(RPC_DIR)).unwrap();
    std::fs::create_dir_all(root.join(NFS_DIR)).unwrap();

    let n = 2 * ROW_GROUP_ROWS + 1234;
    let mut w = RpcWriter::new(&root, 3, 1 << 22);
    for i in 0..n {
        w.push(&read_call(i)).unwrap();
    }
    let (rpc_files, nfs_files) = w.finish().unwrap();
    assert_eq!(rpc_files, ["rpc/rpc-0003-00000.parquet"]);
    assert_eq!(nfs_files, ["nfs/nfs-0003-00000.parquet"]);

    for name in [&rpc_files[0], &nfs_files[0]] {
        let path = root.join(name);
        let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        let groups: Vec<i64> = reader
            .metadata()
            .row_groups()
            .iter()
            .map(|g| g.num_rows())
            .collect();
        let full = ROW_GROUP_ROWS as i64;
        assert_eq!(groups, [full, full, 1234], "{name}");
        // Stored as they are (RpcWriter::new says why); the values read
        // back below check that the pages match what the footer says.
        for g in reader.metadata().row_groups() {
            for c in g.columns() {
                assert_eq!(c.compression(), Compression::UNCOMPRESSED, "{name}");
            }
        }
    }

    // Ids carry the writer number above a count; xids and offsets follow
    // the transactions across the groups' boundaries.
    let rpc = root.join(&rpc_files[0]);
    let ids: Vec<u64> = column::<UInt64Array>(&rpc, "id")
        .iter()
        .flat_map(|a| a.values().to_vec())
        .collect();
    let want: Vec<u64> = (0..n).map(|i| 3 << 48 | i).collect();
    assert_eq!(ids, want);
    let xids: Vec<u32> = column::<UInt32Array>(&rpc, "xid")
        .iter()
        .flat_map(|a| a.values().to_vec())
        .collect();
    assert!(
        xids.iter()
            .enumerate()
            .all(|(i, &x)| x == i as u32 ^ 0x5a5a)
    );

    let nfs = root.join(&nfs_files[0]);
    let offsets: Vec<u64> = column::<UInt64Array>(&nfs, "offset")
        .iter()
        .flat_map(|a| a.values().to_vec())
        .collect();
    assert_eq!(offsets, (0..n).map(|i| i * 4096).collect::<Vec<_>>());
    let rpc_ids: Vec<u64> = column::<UInt64Array>(&nfs, "rpc_id")
        .iter()
        .flat_map(|a| a.values().to_vec())
        .collect();
    assert_eq!(rpc_ids, want);

    std::fs::remove_dir_all(&root).unwrap();
}
