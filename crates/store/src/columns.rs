//! What every table's columns are described by: a [`Column`] names one
//! column, its Arrow type, whether it holds nulls and what it means. A
//! table lists its columns once (`PACKET_COLUMNS`, `RPC_COLUMNS`,
//! `STACK_COLUMNS`, ...); its schema is [`schema_of`] that list, and the
//! docs and `weir` tools read the same list.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

/// One column of a table.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    pub name: &'static str,
    pub data_type: fn() -> DataType,
    pub nullable: bool,
    pub doc: &'static str,
}

/// `col!(name, type, nullable, doc)`: a [`Column`] whose type is one of
/// the functions below.
macro_rules! col {
    ($name:literal, $ty:ident, $nullable:expr, $doc:literal) => {
        $crate::columns::Column {
            name: $name,
            data_type: $ty,
            nullable: $nullable,
            doc: $doc,
        }
    };
}
pub(crate) use col;

/// The Arrow schema of a table's columns, in their order.
pub fn schema_of(cols: &[Column]) -> SchemaRef {
    Arc::new(Schema::new(
        cols.iter()
            .map(|c| Field::new(c.name, (c.data_type)(), c.nullable))
            .collect::<Vec<_>>(),
    ))
}

// The column types the tables use.
pub(crate) fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}
pub(crate) fn u8t() -> DataType {
    DataType::UInt8
}
pub(crate) fn u16t() -> DataType {
    DataType::UInt16
}
pub(crate) fn u32t() -> DataType {
    DataType::UInt32
}
pub(crate) fn u64t() -> DataType {
    DataType::UInt64
}
pub(crate) fn i32t() -> DataType {
    DataType::Int32
}
pub(crate) fn i64t() -> DataType {
    DataType::Int64
}
pub(crate) fn boolt() -> DataType {
    DataType::Boolean
}
pub(crate) fn mac() -> DataType {
    DataType::FixedSizeBinary(6)
}
pub(crate) fn addr() -> DataType {
    DataType::FixedSizeBinary(16)
}
pub(crate) fn text() -> DataType {
    DataType::Utf8
}
/// Names from a small set, by 8-bit codes (the stack table's events and
/// states).
pub(crate) fn dict8() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8))
}
/// Names from a set of up to 32 Ki (the rpc tables' names).
pub(crate) fn dict16() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int16), Box::new(DataType::Utf8))
}
fn list(t: DataType) -> DataType {
    DataType::List(Arc::new(Field::new("item", t, true)))
}
pub(crate) fn texts() -> DataType {
    list(DataType::Utf8)
}
pub(crate) fn u16s() -> DataType {
    list(DataType::UInt16)
}
pub(crate) fn u32s() -> DataType {
    list(DataType::UInt32)
}
pub(crate) fn addrs() -> DataType {
    list(DataType::FixedSizeBinary(16))
}
