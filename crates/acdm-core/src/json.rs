//! Compact JSON, byte for byte what `serde_json::to_vec` writes, with
//! strings escaped 64 bytes at a time.
//!
//! serde_json escapes a string byte by byte (about ten instructions per
//! byte): for a read's 4 KiB window that was the largest single item of
//! the request's profile. [`to_vec`] writes the same text: the structure,
//! numbers and the rare escapes are serde_json's (numbers are handed to
//! its serializer on the same buffer, a `RawValue` is written as it is),
//! and a string is read 64 bytes at a time with vector comparisons that
//! mark every byte JSON must escape (controls, `"` and `\`), clean runs
//! copied whole. A long string
//! that repeats the last long one, or its end (an MCP read's window, in
//! its text block and again in its structured content), is copied from
//! the first one's escaping instead of being escaped again.
//! `tests::the_output_is_serde_jsons_byte_for_byte` holds it to that.

use serde::ser::{self, Serialize};

/// The value as compact JSON, exactly as `serde_json::to_vec` writes it.
///
/// # Errors
/// The errors `serde_json::to_vec` gives: a map key that is not a string,
/// a number, a bool or a char, or a `Serialize` implementation that fails.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(256);
    value.serialize(&mut Writer {
        out: &mut out,
        long: None,
    })?;
    Ok(out)
}

/// The serializer: writes into `out`.
struct Writer<'a> {
    out: &'a mut Vec<u8>,
    /// The last long string written, to write a repeat of it (or of its
    /// end) by copying its escaping ([`Writer::write_string`]).
    long: Option<Long>,
}

/// A long string written, and where its escaping is in the output.
struct Long {
    /// Its bytes.
    text: Vec<u8>,
    /// Its escaping in the output, without the quotes.
    escaped: std::ops::Range<usize>,
}

impl Writer<'_> {
    /// Hands one value to serde_json's own serializer on the same buffer.
    fn serde_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), serde_json::Error> {
        value.serialize(&mut serde_json::Serializer::new(&mut *self.out))
    }

    /// Appends `text` as a JSON string, as [`write_str`] does. A long
    /// string that repeats the last long one, or its end, is not escaped
    /// again: its escaping is copied from the earlier one's. An MCP read
    /// carries its window twice, in its text block (after a line about the
    /// window) and in its structured content, and escaping the window is
    /// most of the cost of writing the answer.
    fn write_string(&mut self, text: &str) {
        if text.len() < LONG {
            write_str(self.out, text);
            return;
        }
        if let Some(long) = &self.long
            && let Some(head) = long.text.len().checked_sub(text.len())
            && long.text.get(head..) == Some(text.as_bytes())
        {
            // Escaping is byte by byte: the escaping of the end is the
            // escaping of the whole after the escaping of its head.
            let from = long.escaped.start + escaped_len(long.text.get(..head).unwrap_or_default());
            self.out.reserve(long.escaped.end - from + 2);
            self.out.push(b'"');
            self.out.extend_from_within(from..long.escaped.end);
            self.out.push(b'"');
            return;
        }
        let start = self.out.len() + 1;
        write_str(self.out, text);
        let end = self.out.len() - 1;
        // The buffer of the last one, reused.
        let long = self.long.get_or_insert_with(|| Long {
            text: Vec::new(),
            escaped: 0..0,
        });
        long.text.clear();
        long.text.extend_from_slice(text.as_bytes());
        long.escaped = start..end;
    }
}

/// The length of `bytes`' escaping ([`escape_char`]'s, and one for a byte
/// that needs none).
fn escaped_len(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .map(|&byte| match escape_char(byte) {
            0 => 1,
            b'u' => 6,
            _ => 2,
        })
        .sum()
}

/// Appends `text` as a JSON string, quotes included.
fn write_str(out: &mut Vec<u8>, text: &str) {
    // A long string that may not fit, escapes included, is most of its
    // answer: room for it twice over with a quarter more for escapes and
    // 1 KiB for the rest, so that the fields after it and a second copy
    // (an MCP answer carries its text as a text block and as structured
    // content) are written without growing the buffer again, each growth
    // copying all written so far.
    let escaped = text.len() + text.len() / 4 + 2;
    if out.capacity() - out.len() < escaped {
        out.reserve(if text.len() >= LONG {
            2 * escaped + 1024
        } else {
            text.len() + 2
        });
    }
    out.push(b'"');
    push_escaped(out, text);
    out.push(b'"');
}

/// Appends `text` escaped as the inside of a JSON string, as serde_json
/// escapes it, without the quotes: escaping is byte by byte, so a text
/// appended in pieces (a `Debug` rendering written chunk by chunk) comes
/// out as if appended whole.
///
/// The text is read 64 bytes at a time: [`escapes`] marks every byte of a
/// block that must be escaped, and each mark is escaped in turn, the clean
/// runs between them copied whole. The tail (under 64 bytes, and every
/// short string) is checked the same way, copied into a block padded with
/// spaces, unless it is shorter than [`SHORT`]: that is marked byte by
/// byte through the escape table, cheaper than the copy.
pub fn push_escaped(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    let mut clean_from = 0;
    let (blocks, tail) = bytes.as_chunks::<BLOCK>();
    for (index, block) in blocks.iter().enumerate() {
        clean_from = push_marked(out, bytes, clean_from, index * BLOCK, escapes(block));
    }
    let marks = if tail.len() < SHORT {
        tail.iter()
            .enumerate()
            .filter(|(_, byte)| escape_char(**byte) != 0)
            .fold(0, |marks, (at, _)| marks | (1 << at))
    } else {
        // A longer tail is checked as a block too, padded with a byte
        // that needs no escape: a log line's values, an answer's keys and
        // short strings cost one check, not one look-up per byte.
        let mut padded = [b' '; BLOCK];
        if let Some(head) = padded.get_mut(..tail.len()) {
            head.copy_from_slice(tail);
        }
        escapes(&padded)
    };
    clean_from = push_marked(out, bytes, clean_from, blocks.len() * BLOCK, marks);
    out.extend_from_slice(bytes.get(clean_from..).unwrap_or_default());
}

/// Escapes each byte `marks` marks in the block of `bytes` at `base` (bit
/// `i` for `bytes[base + i]`), the clean bytes from `clean_from` before
/// each copied whole; returns where the clean bytes start after them.
#[inline]
fn push_marked(
    out: &mut Vec<u8>,
    bytes: &[u8],
    mut clean_from: usize,
    base: usize,
    mut marks: u64,
) -> usize {
    while marks != 0 {
        let hit = base + marks.trailing_zeros() as usize;
        push_clean_then_escape(out, bytes, clean_from, hit);
        clean_from = hit + 1;
        // The lowest mark, done.
        marks &= marks - 1;
    }
    clean_from
}

/// Appends `bytes[clean_from..hit]` as it is, then serde_json's escape of
/// the byte at `hit`.
#[inline]
fn push_clean_then_escape(out: &mut Vec<u8>, bytes: &[u8], clean_from: usize, hit: usize) {
    out.extend_from_slice(bytes.get(clean_from..hit).unwrap_or_default());
    let byte = bytes.get(hit).copied().unwrap_or_default();
    match escape_char(byte) {
        b'u' => {
            let hex = |nibble: u8| HEX.get(usize::from(nibble)).copied().unwrap_or(b'0');
            out.extend_from_slice(&[b'\\', b'u', b'0', b'0', hex(byte >> 4), hex(byte & 0xf)]);
        }
        short => out.extend_from_slice(&[b'\\', short]),
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// What follows the backslash of `byte`'s escape as serde_json writes it
/// (`u` for `\u00XX`), or 0 for a byte written as it is: a look-up in
/// [`ESCAPES`].
#[inline]
fn escape_char(byte: u8) -> u8 {
    ESCAPES.get(usize::from(byte)).copied().unwrap_or(0)
}

/// [`escape_char`] for every byte, made from its definition,
/// [`escape_rule`]: a table is cheaper than a `match` in a loop over
/// bytes (a short tail's, [`escaped_len`]).
const ESCAPES: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut rest: &mut [u8] = &mut table;
    let mut byte: u8 = 0;
    while let [slot, tail @ ..] = rest {
        *slot = escape_rule(byte);
        byte = byte.wrapping_add(1);
        rest = tail;
    }
    table
};

/// serde_json's escapes.
const fn escape_rule(byte: u8) -> u8 {
    match byte {
        0x08 => b'b',
        0x09 => b't',
        0x0a => b'n',
        0x0c => b'f',
        0x0d => b'r',
        b'"' => b'"',
        b'\\' => b'\\',
        0..0x20 => b'u',
        _ => 0,
    }
}

/// A string of at least this many bytes reserves room for more than
/// itself ([`write_str`]).
const LONG: usize = 1024;

/// A tail shorter than this is escaped byte by byte ([`push_escaped`]).
const SHORT: usize = 8;

/// The bytes [`escapes`] looks at together.
const BLOCK: usize = 64;

/// The bytes of `block` that JSON must escape (below 0x20, `"` and `\`),
/// bit `i` for byte `i`: exact, every mark a byte to escape. Four 16-byte
/// vectors (SSE2 on x86-64, NEON on ARM, plain arrays elsewhere). A
/// control or a quote is a byte whose flip of bit 1 is at most 0x20 (the
/// flip maps the controls, 0x00–0x1f, onto one another and `"`, 0x22,
/// onto 0x20): one minimum and one comparison for both. Each vector's
/// marks are the high bits of its comparisons.
fn escapes(block: &[u8; BLOCK]) -> u64 {
    use wide::u8x16;
    let quarter = |bytes: &[u8; 16]| {
        let v = u8x16::new(*bytes);
        let flipped = v ^ u8x16::splat(0x02);
        let control_or_quote = flipped.min(u8x16::splat(0x20)).cmp_eq(flipped);
        let backslash = v.cmp_eq(u8x16::splat(b'\\'));
        // 16 bits, one per byte.
        u64::from((control_or_quote | backslash).move_mask().cast_unsigned() & 0xffff)
    };
    let (quarters, _) = block.as_chunks::<16>();
    quarters
        .iter()
        .enumerate()
        .fold(0, |marks, (at, q)| marks | (quarter(q) << (16 * at)))
}

/// serde_json's name for the struct a `RawValue` serializes as.
const RAW_VALUE: &str = "$serde_json::private::RawValue";

/// A compound value being written: whether an element came already.
struct Compound<'w, 'a> {
    writer: &'w mut Writer<'a>,
    first: bool,
    /// Closing text: `]`, `}`, or `]}` / `}}` for a variant.
    close: &'static [u8],
    /// A `RawValue`: its one field's text is written as it is.
    raw: bool,
}

impl Compound<'_, '_> {
    fn separator(&mut self) {
        if self.first {
            self.first = false;
        } else {
            self.writer.out.push(b',');
        }
    }

    fn key(&mut self, key: &str) {
        self.separator();
        write_str(self.writer.out, key);
        self.writer.out.push(b':');
    }

    fn close(self) -> Result<(), serde_json::Error> {
        self.writer.out.extend_from_slice(self.close);
        Ok(())
    }
}

impl<'w, 'a> Writer<'a> {
    fn open(&'w mut self, open: &[u8], close: &'static [u8]) -> Compound<'w, 'a> {
        self.out.extend_from_slice(open);
        Compound {
            writer: self,
            first: true,
            close,
            raw: false,
        }
    }

    fn open_variant(
        &'w mut self,
        variant: &str,
        open: u8,
        close: &'static [u8],
    ) -> Compound<'w, 'a> {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.push(b':');
        self.out.push(open);
        Compound {
            writer: self,
            first: true,
            close,
            raw: false,
        }
    }
}

impl<'w, 'a> ser::Serializer for &'w mut Writer<'a> {
    type Ok = ();
    type Error = serde_json::Error;
    type SerializeSeq = Compound<'w, 'a>;
    type SerializeTuple = Compound<'w, 'a>;
    type SerializeTupleStruct = Compound<'w, 'a>;
    type SerializeTupleVariant = Compound<'w, 'a>;
    type SerializeMap = Compound<'w, 'a>;
    type SerializeStruct = Compound<'w, 'a>;
    type SerializeStructVariant = Compound<'w, 'a>;

    fn serialize_bool(self, v: bool) -> Result<(), serde_json::Error> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), serde_json::Error> {
        self.serde_json(&v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), serde_json::Error> {
        self.serde_json(&v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), serde_json::Error> {
        self.serde_json(&v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), serde_json::Error> {
        self.serde_json(&v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), serde_json::Error> {
        self.serde_json(&v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), serde_json::Error> {
        self.serde_json(&v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), serde_json::Error> {
        self.serde_json(&v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), serde_json::Error> {
        self.serde_json(&v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), serde_json::Error> {
        self.serde_json(&v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), serde_json::Error> {
        self.serde_json(&v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), serde_json::Error> {
        self.serde_json(&v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), serde_json::Error> {
        self.serde_json(&v)
    }
    fn serialize_char(self, v: char) -> Result<(), serde_json::Error> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), serde_json::Error> {
        self.write_string(v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), serde_json::Error> {
        self.serde_json(v)
    }
    fn serialize_none(self) -> Result<(), serde_json::Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), serde_json::Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), serde_json::Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), serde_json::Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), serde_json::Error> {
        write_str(self.out, variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.push(b':');
        value.serialize(&mut *self)?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'w, 'a>, serde_json::Error> {
        Ok(self.open(b"[", b"]"))
    }
    fn serialize_tuple(self, _len: usize) -> Result<Compound<'w, 'a>, serde_json::Error> {
        Ok(self.open(b"[", b"]"))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Compound<'w, 'a>, serde_json::Error> {
        Ok(self.open(b"[", b"]"))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'w, 'a>, serde_json::Error> {
        Ok(self.open_variant(variant, b'[', b"]}"))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'w, 'a>, serde_json::Error> {
        Ok(self.open(b"{", b"}"))
    }
    fn serialize_struct(
        self,
        name: &'static str,
        _len: usize,
    ) -> Result<Compound<'w, 'a>, serde_json::Error> {
        // A `RawValue` is one field holding its JSON text, written as is.
        if name == RAW_VALUE {
            return Ok(Compound {
                writer: self,
                first: true,
                close: b"",
                raw: true,
            });
        }
        if name.starts_with("$serde_json::") {
            return Err(ser::Error::custom(
                "this serde_json private struct is not written by acdm_core::json",
            ));
        }
        Ok(self.open(b"{", b"}"))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'w, 'a>, serde_json::Error> {
        Ok(self.open_variant(variant, b'{', b"}}"))
    }
}

impl ser::SerializeSeq for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        self.separator();
        value.serialize(&mut *self.writer)
    }
    fn end(self) -> Result<(), Self::Error> {
        self.close()
    }
}

impl ser::SerializeTuple for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), Self::Error> {
        self.close()
    }
}

impl ser::SerializeTupleStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), Self::Error> {
        self.close()
    }
}

impl ser::SerializeTupleVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), Self::Error> {
        self.close()
    }
}

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Self::Error> {
        self.separator();
        // A string key is written as it comes; any other kind goes by
        // serde_json's rules (numbers, bools and chars become strings),
        // on a buffer of its own.
        let before = self.writer.out.len();
        let key_writer = KeyWriter {
            out: &mut *self.writer.out,
            raw: false,
        };
        if key.serialize(key_writer).is_err() {
            self.writer.out.truncate(before);
            let key = serde_json::to_vec(&KeyOnly(key))?;
            // `{"<key>":null}`: keep `"<key>"`.
            let quoted = key.get(1..key.len().saturating_sub(6)).unwrap_or_default();
            self.writer.out.extend_from_slice(quoted);
        }
        self.writer.out.push(b':');
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Self::Error> {
        value.serialize(&mut *self.writer)
    }
    fn end(self) -> Result<(), Self::Error> {
        self.close()
    }
}

/// A key alone in a one-entry map, so serde_json applies its key rules:
/// `{"<key>":null}`; the caller keeps what is between the braces and the
/// colon.
struct KeyOnly<'k, K: ?Sized>(&'k K);

impl<K: Serialize + ?Sized> Serialize for KeyOnly<'_, K> {
    fn serialize<S: ser::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use ser::SerializeMap as _;
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_key(self.0)?;
        map.serialize_value(&())?;
        map.end()
    }
}

/// A map key that is a string (or a newtype or unit variant of one),
/// written escaped; anything else is refused before a byte is written.
struct KeyWriter<'o> {
    out: &'o mut Vec<u8>,
    /// Written as it is (a `RawValue`'s text), not as a JSON string.
    raw: bool,
}

impl ser::Serializer for KeyWriter<'_> {
    type Ok = ();
    type Error = serde_json::Error;
    type SerializeSeq = ser::Impossible<(), serde_json::Error>;
    type SerializeTuple = ser::Impossible<(), serde_json::Error>;
    type SerializeTupleStruct = ser::Impossible<(), serde_json::Error>;
    type SerializeTupleVariant = ser::Impossible<(), serde_json::Error>;
    type SerializeMap = ser::Impossible<(), serde_json::Error>;
    type SerializeStruct = ser::Impossible<(), serde_json::Error>;
    type SerializeStructVariant = ser::Impossible<(), serde_json::Error>;

    fn serialize_str(self, v: &str) -> Result<(), serde_json::Error> {
        if self.raw {
            self.out.extend_from_slice(v.as_bytes());
        } else {
            write_str(self.out, v);
        }
        Ok(())
    }
    fn serialize_bool(self, _: bool) -> Result<(), serde_json::Error> {
        Err(not_str())
    }
    fn serialize_i8(self, _: i8) -> Result<(), serde_json::Error> {
        Err(not_str())
    }
    fn serialize_i16(self, _: i16) -> Result<(), serde_json::Error> {
        Err(not_str())
    }
    fn serialize_i32(self, _: i32) -> Result<(), serde_json::Error> {
        Err(not_str())
    }
    fn serialize_i64(self, _: i64) -> Result<(), serde_json::Error> {
        Err(not_str())
    }
    fn serialize_u8(self, _: u8) -> Result<(), serde_json::Error> {
        Err(not_str())
    }
    fn serialize_u16(self, _: u16) -> Result<(), serde_json::Error> {
        Err(not_str())
    }
    fn serialize_u32(self, _: u32) -> Result<(), serde_json::Error> {
        Err(not_str())
    }
    fn serialize_u64(self, _: u64) -> Result<(), serde_json::Error> {
        Err(not_str())
    }
    fn serialize_f32(self, _: f32) -> Result<(), serde_json::Error> {
        Err(not_str())
    }
    fn serialize_f64(self, _: f64) -> Result<(), serde_json::Error> {
        Err(not_str())
    }
    fn serialize_char(self, _: char) -> Result<(), serde_json::Error> {
        Err(not_str())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), serde_json::Error> {
        Err(not_str())
    }
    fn serialize_none(self) -> Result<(), serde_json::Error> {
        Err(not_str())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), serde_json::Error> {
        Err(not_str())
    }
    fn serialize_unit(self) -> Result<(), serde_json::Error> {
        Err(not_str())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), serde_json::Error> {
        Err(not_str())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), serde_json::Error> {
        write_str(self.out, variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), serde_json::Error> {
        Err(not_str())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, serde_json::Error> {
        Err(not_str())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, serde_json::Error> {
        Err(not_str())
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, serde_json::Error> {
        Err(not_str())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, serde_json::Error> {
        Err(not_str())
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, serde_json::Error> {
        Err(not_str())
    }
    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, serde_json::Error> {
        Err(not_str())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, serde_json::Error> {
        Err(not_str())
    }
}

fn not_str() -> serde_json::Error {
    ser::Error::custom("not a string")
}

impl ser::SerializeStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        if self.raw {
            return value.serialize(KeyWriter {
                out: &mut *self.writer.out,
                raw: true,
            });
        }
        self.key(key);
        value.serialize(&mut *self.writer)
    }
    fn end(self) -> Result<(), Self::Error> {
        self.close()
    }
}

impl ser::SerializeStructVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Self::Error> {
        ser::SerializeStruct::serialize_field(self, key, value)
    }
    fn end(self) -> Result<(), Self::Error> {
        self.close()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde::Serialize;
    use serde_json::{Value, json};

    use super::{BLOCK, SHORT, push_escaped, to_vec};

    fn same<T: Serialize + ?Sized + std::fmt::Debug>(value: &T) {
        let ours = to_vec(value).unwrap();
        let theirs = serde_json::to_vec(value).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&theirs),
            "{value:?}"
        );
    }

    /// A small deterministic generator (xorshift), so a failure repeats.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn text(&mut self) -> String {
            const SOME: &[char] = &[
                'a',
                'z',
                ' ',
                '"',
                '\\',
                '/',
                '\n',
                '\r',
                '\t',
                '\u{0}',
                '\u{1}',
                '\u{8}',
                '\u{b}',
                '\u{c}',
                '\u{1f}',
                '\u{7f}',
                'é',
                '报',
                '\u{2028}',
                '\u{1F600}',
                '\u{fffd}',
            ];
            let len = match self.below(4) {
                0 => self.below(4),
                1 => self.below(20),
                2 => self.below(100),
                _ => self.below(5000),
            };
            (0..len)
                .map(|_| match self.below(3) {
                    0 => SOME[self.below(SOME.len() as u64) as usize],
                    _ => char::from(b' ' + self.below(95) as u8),
                })
                .collect()
        }
        fn value(&mut self, depth: u32) -> Value {
            match self.below(if depth > 3 { 6 } else { 8 }) {
                0 => Value::Null,
                1 => Value::Bool(self.below(2) == 0),
                2 => json!(self.next() as i64),
                3 => json!(self.next()),
                4 => json!((self.next() as f64) / 7.0 - 1e12),
                5 => Value::String(self.text()),
                6 => Value::Array((0..self.below(5)).map(|_| self.value(depth + 1)).collect()),
                _ => Value::Object(
                    (0..self.below(6))
                        .map(|_| (self.text(), self.value(depth + 1)))
                        .collect(),
                ),
            }
        }
    }

    #[test]
    fn escaping_in_pieces_is_escaping_whole() {
        let text = "a \"quoted\" \\ path\n\twith\u{1} controls, naïve 报告 \u{7f} and a long run of plain words";
        let whole = serde_json::to_string(text).unwrap();
        let inside = &whole[1..whole.len() - 1];
        let cuts: Vec<usize> = (0..=text.len())
            .filter(|&i| text.is_char_boundary(i))
            .collect();
        for &a in &cuts {
            for &b in cuts.iter().filter(|&&b| b >= a) {
                let mut out = Vec::new();
                for piece in [&text[..a], &text[a..b], &text[b..]] {
                    push_escaped(&mut out, piece);
                }
                assert_eq!(
                    std::str::from_utf8(&out).unwrap(),
                    inside,
                    "cut at {a} and {b}"
                );
            }
        }
    }

    #[test]
    fn the_output_is_serde_jsons_byte_for_byte() {
        // Every ASCII byte, alone and at every offset of a clean run and
        // past it: runs of blocks ending in a byte-by-byte tail (under
        // `SHORT`) and in a padded one.
        for byte in 0u8..0x80 {
            let c = char::from(byte);
            same(&c.to_string());
            same(&c);
            for len in [BLOCK + SHORT - 2, 2 * BLOCK + SHORT] {
                let clean: String = ('a'..='z').cycle().take(len).collect();
                for at in 0..=clean.len() {
                    let mut text = clean.clone();
                    text.insert(at, c);
                    same(&text);
                }
            }
        }
        same("");
        same("naïve café 报告 \u{2028} \u{1F600} \u{7f}");
        same(&"line with \"quotes\" and \\ and \t tab\n".repeat(200));
        // Long strings (room reserved beyond them), twice in one answer,
        // around the threshold and with fields after them.
        for len in [super::LONG - 1, super::LONG, super::LONG + 1, 4096, 70_000] {
            let long: String = "report line, \"quoted\"\n"
                .chars()
                .cycle()
                .take(len)
                .collect();
            let answer = json!({"content": [{"type": "text", "text": long}], "structuredContent": {"content": long, "size": len}, "isError": false});
            same(&answer);
            // One growth for both copies, not one per copy: the buffer
            // ends well short of twice what it holds.
            let written = to_vec(&answer).unwrap();
            assert!(
                written.capacity() < written.len() + len / 2 + 2048,
                "{len}: {} bytes in {}",
                written.len(),
                written.capacity()
            );
        }
        // Numbers, floats that look like integers, the edges.
        same(&json!([
            0,
            -0.0,
            1.0,
            1.5,
            1e300,
            -1e-300,
            i64::MIN,
            u64::MAX,
            f64::NAN
        ]));
        same(&(i128::MIN, u128::MAX, 1.25f32, 'x', (), Some(3), None::<u8>));
        same(&b"bytes\0"[..]);
        // Values drawn at random.
        let mut rng = Rng(0x5eed_1234_abcd_0001);
        for _ in 0..2000 {
            same(&rng.value(0));
        }
    }

    #[derive(Debug, Serialize)]
    #[serde(rename_all = "snake_case")]
    enum Shape {
        Unit,
        Newtype(String),
        Tuple(u8, String),
        Struct { a: i32, b: Option<String> },
    }

    #[derive(Debug, Serialize)]
    #[serde(tag = "kind")]
    enum Tagged {
        One { x: u8 },
        Two,
    }

    #[derive(Debug, Serialize)]
    struct Inner {
        z: &'static str,
        a: u8,
    }

    #[derive(Debug, Serialize)]
    struct Newtype(String);

    #[derive(Debug, Serialize)]
    struct Everything {
        // Struct order is kept, not sorted.
        zeta: u8,
        alpha: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
        shapes: Vec<Shape>,
        tagged: Vec<Tagged>,
        #[serde(flatten)]
        inner: Inner,
        by_number: BTreeMap<u32, bool>,
        by_bool: BTreeMap<bool, u8>,
        by_char: BTreeMap<char, u8>,
        by_newtype: BTreeMap<String, Newtype>,
        one_key: HashMap<String, Vec<Value>>,
        unit: (),
        tuple: (u8, &'static str),
    }

    #[test]
    fn a_blocks_marks_are_exactly_its_bytes_to_escape() {
        let needs = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
        let marks = |block: &[u8; BLOCK]| {
            block
                .iter()
                .enumerate()
                .filter(|(_, b)| needs(**b))
                .fold(0u64, |marks, (i, _)| marks | (1 << i))
        };
        // Every byte value at every place of a block, over every
        // background byte, with a second byte after it.
        for background in 0..=255u8 {
            for byte in 0..=255u8 {
                for at in 0..BLOCK {
                    let mut block = [background; BLOCK];
                    block[at] = byte;
                    block[(at + 17) % BLOCK] = byte.wrapping_add(background);
                    assert_eq!(super::escapes(&block), marks(&block), "{block:?}");
                }
            }
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..200_000 {
            let block: [u8; BLOCK] = std::array::from_fn(|_| match rng.below(40) {
                0 => b'"',
                1 => b'\\',
                2 => rng.below(0x20) as u8,
                _ => 0x20 + rng.below(0xe0) as u8,
            });
            assert_eq!(super::escapes(&block), marks(&block), "{block:?}");
        }
    }

    #[test]
    fn strings_of_every_length_around_the_block_are_escaped_as_serde_json_escapes() {
        // Escapes at each end of a block and of the byte-by-byte and the
        // padded tail, for every length up to three blocks.
        let mut rng = Rng(0x0123_4567_89ab_cdef);
        for len in 0..=3 * BLOCK + 4 {
            for _ in 0..50 {
                let text: String = (0..len)
                    .map(|_| match rng.below(6) {
                        0 => '\n',
                        1 => '"',
                        2 => '\\',
                        3 => '\u{1f}',
                        _ => 'a',
                    })
                    .collect();
                same(&text);
            }
        }
    }

    #[test]
    fn a_long_string_repeated_or_ending_an_earlier_one_is_written_the_same() {
        // An MCP read's shape: a text block of a line and the window, then
        // the window alone; escapes at the cut and on both sides of it.
        let window = format!(
            "\n\"{}\\\u{1}報告\n{}\t",
            "a line of the report\n".repeat(60),
            "é".repeat(300)
        );
        assert!(window.len() >= super::LONG);
        for head in [
            "",
            "x",
            "\n",
            "\"",
            "\u{1f}",
            "bytes 0–4096 of 4096\n\n",
            "报",
        ] {
            let text = format!("{head}{window}");
            same(
                &json!({"content": [{"type": "text", "text": text}], "structuredContent": {"content": window}}),
            );
            // The same string twice, the longer one after, a third one.
            same(&json!([window, window, text, window, "short", window]));
            // Same length, other bytes: not a repeat.
            let other = window.replace('a', "b");
            same(&json!([text, other, window]));
            // A short end of a long string is written on its own.
            same(&json!([text, "report\n", window]));
        }
        // A field between the two does not move the first one's escaping.
        let out = to_vec(&json!({"a": window, "b": 7, "c": window})).unwrap();
        let escaped = serde_json::to_string(&window).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("{{\"a\":{escaped},\"b\":7,\"c\":{escaped}}}")
        );
    }

    /// Where a repeat starts in the first string's escaping is counted by
    /// `escaped_len`: it must count what `push_escaped` writes, for every byte.
    #[test]
    fn the_escaped_length_of_a_head_is_the_length_of_its_escaping() {
        for byte in 0u8..0x80 {
            let mut out = Vec::new();
            push_escaped(&mut out, &char::from(byte).to_string());
            assert_eq!(super::escaped_len(&[byte]), out.len(), "byte {byte:#04x}");
        }
        for text in [
            "é",
            "报告",
            "\u{1F600}",
            "a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{7f}",
        ] {
            let mut out = Vec::new();
            push_escaped(&mut out, text);
            assert_eq!(super::escaped_len(text.as_bytes()), out.len(), "{text:?}");
        }
    }

    #[test]
    fn every_shape_serde_can_send_is_written_the_same() {
        let everything = Everything {
            zeta: 1,
            alpha: "a\"b".to_owned(),
            skipped: None,
            shapes: vec![
                Shape::Unit,
                Shape::Newtype("n\n".to_owned()),
                Shape::Tuple(2, "t".to_owned()),
                Shape::Struct { a: -3, b: None },
                Shape::Struct {
                    a: 4,
                    b: Some("\u{1}".to_owned()),
                },
            ],
            tagged: vec![Tagged::One { x: 9 }, Tagged::Two],
            inner: Inner { z: "flat", a: 7 },
            by_number: BTreeMap::from([(1, true), (20, false)]),
            by_bool: BTreeMap::from([(true, 1), (false, 0)]),
            by_char: BTreeMap::from([('"', 1), ('k', 2)]),
            by_newtype: BTreeMap::from([("k\t".to_owned(), Newtype("v".to_owned()))]),
            one_key: HashMap::from([("only".to_owned(), vec![json!({"b": 1, "a": [null]})])]),
            unit: (),
            tuple: (5, "five"),
        };
        same(&everything);
        // A RawValue is written as it is, inside anything.
        let raw = serde_json::value::RawValue::from_string("{\"b\": [1, 2] }".to_owned()).unwrap();
        same(&(raw.as_ref(), BTreeMap::from([("k", &raw)])));
        // What serde_json refuses, this refuses too.
        let bad: BTreeMap<Vec<u8>, u8> = BTreeMap::from([(vec![1], 1)]);
        assert!(serde_json::to_vec(&bad).is_err());
        assert!(to_vec(&bad).is_err());
    }
}
