//! The few functions SQL cannot say: addresses as text. DuckDB users get
//! the same from the macros in docs/ANALYSIS.md.

use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, FixedSizeBinaryArray, StringArray, StringBuilder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::{ColumnarValue, Volatility, create_udf};
use datafusion::prelude::SessionContext;

/// Registers `ip_text(addr)` and `mac_text(mac)`.
pub fn register(ctx: &SessionContext) {
    ctx.register_udf(create_udf(
        "ip_text",
        vec![DataType::FixedSizeBinary(16)],
        DataType::Utf8,
        Volatility::Immutable,
        Arc::new(|args: &[ColumnarValue]| text_of(args, 16, write_ip)),
    ));
    ctx.register_udf(create_udf(
        "mac_text",
        vec![DataType::FixedSizeBinary(6)],
        DataType::Utf8,
        Volatility::Immutable,
        Arc::new(|args: &[ColumnarValue]| text_of(args, 6, write_mac)),
    ));
}

/// An IPv4-mapped address (`::ffff:a.b.c.d`, how the records keep IPv4) as
/// dotted quad; any other in RFC 5952 form.
pub fn write_ip(b: &[u8], out: &mut String) {
    let Ok(a) = <[u8; 16]>::try_from(b) else {
        return;
    };
    if a[..10].iter().all(|&x| x == 0) && a[10] == 0xff && a[11] == 0xff {
        let _ = write!(out, "{}", Ipv4Addr::new(a[12], a[13], a[14], a[15]));
    } else {
        let _ = write!(out, "{}", Ipv6Addr::from(a));
    }
}

pub fn write_mac(b: &[u8], out: &mut String) {
    for (i, x) in b.iter().enumerate() {
        if i > 0 {
            out.push(':');
        }
        let _ = write!(out, "{x:02x}");
    }
}

/// Each value of `bin` as `write` writes it (a null stays null).
pub fn text_column(bin: &FixedSizeBinaryArray, write: impl Fn(&[u8], &mut String)) -> StringArray {
    let mut out = StringBuilder::with_capacity(bin.len(), bin.len() * 16);
    let mut s = String::new();
    for i in 0..bin.len() {
        if bin.is_null(i) {
            out.append_null();
        } else {
            s.clear();
            write(bin.value(i), &mut s);
            out.append_value(&s);
        }
    }
    out.finish()
}

fn text_of(
    args: &[ColumnarValue],
    width: i32,
    write: impl Fn(&[u8], &mut String),
) -> Result<ColumnarValue> {
    let arrays = ColumnarValue::values_to_arrays(args)?;
    let Some(input) = arrays.first() else {
        return Err(DataFusionError::Plan("expects one argument".into()));
    };
    let Some(bin) = input.as_any().downcast_ref::<FixedSizeBinaryArray>() else {
        return Err(DataFusionError::Plan(format!(
            "expects FixedSizeBinary({width}), got {}",
            input.data_type()
        )));
    };
    let array: ArrayRef = Arc::new(text_column(bin, write));
    let scalar = args.iter().all(|a| matches!(a, ColumnarValue::Scalar(_)));
    if scalar {
        return datafusion::common::ScalarValue::try_from_array(&array, 0)
            .map(ColumnarValue::Scalar);
    }
    Ok(ColumnarValue::Array(array))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_as_text() {
        let mut s = String::new();
        let mut v4 = [0u8; 16];
        v4[10] = 0xff;
        v4[11] = 0xff;
        v4[12..].copy_from_slice(&[10, 0, 0, 1]);
        write_ip(&v4, &mut s);
        assert_eq!(s, "10.0.0.1");
        s.clear();
        write_ip(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets(), &mut s);
        assert_eq!(s, "2001:db8::1");
        s.clear();
        write_mac(&[0, 0x1b, 0x21, 0xaa, 0xbb, 0x0c], &mut s);
        assert_eq!(s, "00:1b:21:aa:bb:0c");
    }
}
