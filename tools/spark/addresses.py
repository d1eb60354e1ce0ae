"""weir's address columns as text in Spark SQL, as weir prints them: IPv4
(kept mapped into IPv6, 16 bytes) dotted, IPv6 in RFC 5952 form, MACs as
aa:bb:cc:dd:ee:ff, lists of addresses (dns.answer_addrs) as lists of text.

    import sys; sys.path.insert(0, "tools/spark")
    from addresses import register
    register(spark)   # ip_text(a), ip_texts(list), mac_text(m)
"""


def register(spark):
    """Registers ip_text, ip_texts and mac_text as Spark SQL functions.
    They are defined in here so that Spark ships them to its Python
    workers by value (those do not have this file on their path)."""
    from pyspark.sql.types import ArrayType, StringType

    def ip_text(b):
        import ipaddress

        if b is None or len(b) != 16:
            return None
        b = bytes(b)
        if b[:10] == bytes(10) and b[10:12] == b"\xff\xff":
            return str(ipaddress.IPv4Address(b[12:]))
        return ipaddress.IPv6Address(b).compressed

    def ip_texts(items):
        return None if items is None else [ip_text(b) for b in items]

    def mac_text(b):
        return None if b is None else ":".join(f"{x:02x}" for x in bytes(b))

    spark.udf.register("ip_text", ip_text, StringType())
    spark.udf.register("ip_texts", ip_texts, ArrayType(StringType()))
    spark.udf.register("mac_text", mac_text, StringType())
