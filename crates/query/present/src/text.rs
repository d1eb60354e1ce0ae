//! Values as people read them, done once before a table, CSV or JSON is
//! written: every address column (by type, `store::identify::address_type`:
//! IP addresses, MACs, lists of them) as text, so that no one has to know
//! `ip_text`; for CSV, lists as one field `[a, b]`, as DuckDB's CSV writer
//! writes them. The Parquet files keep their 16-byte columns.

use std::sync::Arc;

use analyze::arrow::array::{Array, ArrayRef, AsArray, GenericListArray, OffsetSizeTrait};
use analyze::arrow::array::{RecordBatch, StringBuilder};
use analyze::arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use analyze::arrow::util::display::{ArrayFormatter, FormatOptions};
use store::identify::{Identifies, address_type};

use analyze::AnalyzeError;
use analyze::Table;
use analyze::udf::{text_column, write_ip, write_mac};

/// `tables` with their address columns as text.
pub(crate) fn addresses_as_text(tables: &[Table]) -> Result<Vec<Table>, AnalyzeError> {
    tables
        .iter()
        .map(|t| {
            map_columns(t, |f| {
                let kind = address_type(f.data_type())?;
                Some((text_type(f.data_type()), Conversion::Address(kind)))
            })
        })
        .collect()
}

/// `t` with its nested columns (lists, structs) as one text field each:
/// `[a, b]`, a null inside written `NULL`, as DuckDB writes them.
pub(crate) fn nested_as_text(t: &Table) -> Result<Table, AnalyzeError> {
    map_columns(t, |f| {
        f.data_type()
            .is_nested()
            .then_some((DataType::Utf8, Conversion::Display))
    })
}

#[derive(Clone, Copy)]
enum Conversion {
    Address(Identifies),
    Display,
}

/// The type an address column gets: text, or a list of text.
fn text_type(t: &DataType) -> DataType {
    match t {
        DataType::List(f) => DataType::List(text_item(f)),
        DataType::LargeList(f) => DataType::LargeList(text_item(f)),
        _ => DataType::Utf8,
    }
}

fn text_item(f: &FieldRef) -> FieldRef {
    Arc::new(Field::new(
        f.name(),
        text_type(f.data_type()),
        f.is_nullable(),
    ))
}

/// `t` with the columns `convert` picks given their new type.
fn map_columns(
    t: &Table,
    convert: impl Fn(&Field) -> Option<(DataType, Conversion)>,
) -> Result<Table, AnalyzeError> {
    let plan: Vec<Option<(DataType, Conversion)>> =
        t.schema.fields().iter().map(|f| convert(f)).collect();
    if plan.iter().all(Option::is_none) {
        return Ok(Table {
            name: t.name.clone(),
            schema: t.schema.clone(),
            batches: t.batches.clone(),
        });
    }
    let fields: Vec<FieldRef> = t
        .schema
        .fields()
        .iter()
        .zip(&plan)
        .map(|(f, p)| match p {
            Some((ty, _)) => Arc::new(Field::new(f.name(), ty.clone(), f.is_nullable())),
            None => f.clone(),
        })
        .collect();
    let schema: SchemaRef = Arc::new(Schema::new_with_metadata(
        fields,
        t.schema.metadata().clone(),
    ));
    let mut batches = Vec::with_capacity(t.batches.len());
    for b in &t.batches {
        let columns = b
            .columns()
            .iter()
            .zip(&plan)
            .map(|(a, p)| match p {
                None => Ok(a.clone()),
                Some((_, Conversion::Address(kind))) => address_text(a.as_ref(), *kind),
                Some((_, Conversion::Display)) => display_text(a.as_ref()),
            })
            .collect::<Result<Vec<_>, _>>()?;
        batches.push(
            RecordBatch::try_new(schema.clone(), columns)
                .map_err(|e| AnalyzeError::Engine(format!("{}: {e}", t.name)))?,
        );
    }
    Ok(Table {
        name: t.name.clone(),
        schema,
        batches,
    })
}

/// An address column (or a list of addresses) as text.
fn address_text(a: &dyn Array, kind: Identifies) -> Result<ArrayRef, AnalyzeError> {
    match a.data_type() {
        DataType::FixedSizeBinary(_) => {
            let bin = a.as_fixed_size_binary();
            let write = if kind == Identifies::Mac {
                write_mac
            } else {
                write_ip
            };
            Ok(Arc::new(text_column(bin, write)))
        }
        DataType::List(_) => list_text(a.as_list::<i32>(), kind),
        DataType::LargeList(_) => list_text(a.as_list::<i64>(), kind),
        other => Err(AnalyzeError::Engine(format!(
            "{other}: not a column of addresses"
        ))),
    }
}

fn list_text<O: OffsetSizeTrait>(
    l: &GenericListArray<O>,
    kind: Identifies,
) -> Result<ArrayRef, AnalyzeError> {
    let values = address_text(l.values().as_ref(), kind)?;
    let item = Arc::new(Field::new("item", values.data_type().clone(), true));
    let list =
        GenericListArray::<O>::try_new(item, l.offsets().clone(), values, l.nulls().cloned())
            .map_err(|e| AnalyzeError::Engine(e.to_string()))?;
    Ok(Arc::new(list))
}

/// Any column as its display text (a null stays null).
fn display_text(a: &dyn Array) -> Result<ArrayRef, AnalyzeError> {
    let opts = FormatOptions::default().with_null("NULL");
    let fmt = ArrayFormatter::try_new(a, &opts).map_err(|e| AnalyzeError::Engine(e.to_string()))?;
    let mut out = StringBuilder::with_capacity(a.len(), a.len() * 16);
    for i in 0..a.len() {
        if a.is_null(i) {
            out.append_null();
        } else {
            out.append_value(fmt.value(i).to_string());
        }
    }
    Ok(Arc::new(out.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyze::arrow::array::{FixedSizeBinaryBuilder, ListBuilder};

    fn mapped(ip: [u8; 4]) -> [u8; 16] {
        let mut a = [0u8; 16];
        a[10] = 0xff;
        a[11] = 0xff;
        a[12..].copy_from_slice(&ip);
        a
    }

    #[test]
    fn addresses_and_lists_of_them_become_text() {
        let mut client = FixedSizeBinaryBuilder::new(16);
        client.append_value(mapped([10, 78, 0, 1])).unwrap();
        client.append_null();
        let mut mac = FixedSizeBinaryBuilder::new(6);
        mac.append_value([0, 0x1b, 0x21, 0xaa, 0xbb, 0x0c]).unwrap();
        mac.append_value([0xff; 6]).unwrap();
        let mut answers = ListBuilder::new(FixedSizeBinaryBuilder::new(16));
        answers
            .values()
            .append_value(mapped([192, 0, 2, 7]))
            .unwrap();
        answers
            .values()
            .append_value(
                "2001:db8::1"
                    .parse::<std::net::Ipv6Addr>()
                    .unwrap()
                    .octets(),
            )
            .unwrap();
        answers.append(true);
        answers.append(false);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(client.finish()),
            Arc::new(mac.finish()),
            Arc::new(answers.finish()),
        ];
        let schema = Arc::new(Schema::new(vec![
            Field::new("client", columns[0].data_type().clone(), true),
            Field::new("eth_src", columns[1].data_type().clone(), true),
            Field::new("answer_addrs", columns[2].data_type().clone(), true),
        ]));
        let t = Table {
            name: "dns".into(),
            schema: schema.clone(),
            batches: vec![RecordBatch::try_new(schema, columns).unwrap()],
        };
        let t = addresses_as_text(&[t]).unwrap().remove(0);
        let b = &t.batches[0];
        let client = b.column(0).as_string::<i32>();
        assert_eq!(client.value(0), "10.78.0.1");
        assert!(client.is_null(1));
        assert_eq!(b.column(1).as_string::<i32>().value(0), "00:1b:21:aa:bb:0c");
        let csv = nested_as_text(&t).unwrap();
        let answers = csv.batches[0].column(2).as_string::<i32>();
        assert_eq!(answers.value(0), "[192.0.2.7, 2001:db8::1]");
        assert!(answers.is_null(1));
        // Columns that are not nested stay as they are.
        assert_eq!(csv.batches[0].column(0).as_string::<i32>(), client);
    }
}
