//! The JSON log: one object per line, the shape `tracing-subscriber`'s
//! JSON format gives with flattened events and the current span —
//! `{"timestamp","level",<the event's fields>,"target","span":{<fields>,"name"}}`
//! — written by a layer of our own for its cost.
//!
//! `tracing-subscriber`'s JSON fields keep a span's fields as JSON text:
//! every `Span::record` parses that text back into a map, adds the field
//! and writes it out again, and every event parses it once more to nest
//! it. The request span is recorded six to eight times per request, so
//! that was a tenth of a read's CPU (docs/performance.md). Here a span's
//! fields are kept as a list of already encoded values: a record replaces
//! one entry, an event copies them out.

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::io::Write as _;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_log::NormalizeEvent as _;
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The layer: JSON lines to `writer`.
#[derive(Debug)]
pub struct JsonLines<W> {
    writer: W,
}

impl<W> JsonLines<W> {
    /// A layer writing each event as one line to what `writer` makes.
    pub fn new(writer: W) -> Self {
        Self { writer }
    }
}

/// A span's fields, each with its value already encoded as JSON, in the
/// order they were first given, the values one after the other in one
/// buffer (a field's own `String` was an allocation per field and record).
/// Kept in the span's extensions.
#[derive(Debug)]
struct SpanFields {
    /// Each field's name and where its value is in `values`.
    index: Vec<(&'static str, std::ops::Range<usize>)>,
    /// The encoded values, and the replaced ones until a compaction.
    values: Vec<u8>,
    /// Bytes of `values` that replaced values still hold.
    dead: usize,
}

impl SpanFields {
    const fn new() -> Self {
        Self {
            index: Vec::new(),
            values: Vec::new(),
            dead: 0,
        }
    }

    fn with_capacity(fields: usize) -> Self {
        Self {
            index: Vec::with_capacity(fields),
            values: Vec::with_capacity(fields * 24),
            dead: 0,
        }
    }

    /// Starts a value: what is appended to `values` from the returned
    /// offset until [`SpanFields::end`] is its encoding.
    fn begin(&mut self) -> usize {
        self.values.len()
    }

    /// Ends the value begun at `start` as `name`'s, replacing an earlier
    /// one.
    fn end(&mut self, name: &'static str, start: usize) {
        let value = start..self.values.len();
        match self.index.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => {
                self.dead += slot.1.len();
                slot.1 = value;
            }
            None => self.index.push((name, value)),
        }
        // A field recorded again and again (a long-lived span's counter)
        // does not grow the buffer without end.
        if self.dead > 256 && self.dead * 2 > self.values.len() {
            self.compact();
        }
    }

    /// Sets `name` to the already encoded `value`.
    fn set(&mut self, name: &'static str, value: &[u8]) {
        let start = self.begin();
        self.values.extend_from_slice(value);
        self.end(name, start);
    }

    fn compact(&mut self) {
        let mut values = Vec::with_capacity(self.values.len() - self.dead);
        for (_, range) in &mut self.index {
            let start = values.len();
            values.extend_from_slice(self.values.get(range.clone()).unwrap_or_default());
            *range = start..values.len();
        }
        self.values = values;
        self.dead = 0;
    }

    /// The fields, each with its encoded value.
    fn iter(&self) -> impl Iterator<Item = (&'static str, &[u8])> {
        self.index
            .iter()
            .map(|(name, range)| (*name, self.values.get(range.clone()).unwrap_or_default()))
    }

    fn clear(&mut self) {
        self.index.clear();
        self.values.clear();
        self.dead = 0;
    }
}

/// Appends `at` as UTC in the form `2026-11-26T04:01:35.354907Z`
/// (microseconds), as `chrono`'s `%Y-%m-%dT%H:%M:%S%.6fZ` writes it,
/// without parsing a format string per line. A time before 1970 is
/// written as 1970's first microsecond.
fn push_timestamp(out: &mut Vec<u8>, at: std::time::SystemTime) {
    let since = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let seconds = since.as_secs();
    let (days, second_of_day) = (seconds / 86_400, seconds % 86_400);
    // Days to a civil date (H. Hinnant's `civil_from_days`, for days from
    // 1970-01-01 on).
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    // Digit by digit: `write!` with its padded numbers was a third of a
    // line's cost.
    let fields = [
        (year, 4, b'-'),
        (month, 2, b'-'),
        (day, 2, b'T'),
        (second_of_day / 3600, 2, b':'),
        (second_of_day / 60 % 60, 2, b':'),
        (second_of_day % 60, 2, b'.'),
        (u64::from(since.subsec_micros()), 6, b'Z'),
    ];
    for (value, width, then) in fields {
        push_padded(out, value, width);
        out.push(then);
    }
}

/// Appends `value` in decimal, with leading zeros to `width` digits (as
/// `{value:0width$}` writes it: a longer number is written whole).
fn push_padded(out: &mut Vec<u8>, mut value: u64, width: usize) {
    let mut digits = [b'0'; 20];
    let mut len = 0;
    for slot in digits.iter_mut().rev() {
        *slot = b'0' + u8::try_from(value % 10).unwrap_or(0);
        value /= 10;
        len += 1;
        if value == 0 {
            break;
        }
    }
    out.extend(std::iter::repeat_n(b'0', width.saturating_sub(len)));
    out.extend_from_slice(digits.get(digits.len() - len..).unwrap_or_default());
}

/// Appends `text` as a JSON string (quoted and escaped, as serde_json
/// writes it).
fn push_str(out: &mut Vec<u8>, text: &str) {
    out.push(b'"');
    acdm_core::json::push_escaped(out, text);
    out.push(b'"');
}

/// Appends what `value` formats to as a JSON string, written straight
/// into `out` rather than formatted into a string of its own first.
fn push_display(out: &mut Vec<u8>, value: fmt::Arguments<'_>) {
    out.push(b'"');
    // Escaping into a Vec cannot fail; a value whose formatting fails
    // leaves what it wrote, as it would in a string.
    let _ = Escaped(out).write_fmt(value);
    out.push(b'"');
}

/// Escapes what is written to it into a JSON string's inside.
struct Escaped<'a>(&'a mut Vec<u8>);

impl fmt::Write for Escaped<'_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        acdm_core::json::push_escaped(self.0, text);
        Ok(())
    }
}

/// Appends a number or a bool as serde_json writes it (a non-finite float
/// as `null`).
fn push_number(out: &mut Vec<u8>, value: impl serde::Serialize) {
    if serde_json::to_writer(&mut *out, &value).is_err() {
        out.extend_from_slice(b"null");
    }
}

/// Encodes what a visitor is shown into a span's list.
struct SpanVisitor<'a>(&'a mut SpanFields);

impl SpanVisitor<'_> {
    fn encode(&mut self, field: &Field, encode: impl FnOnce(&mut Vec<u8>)) {
        let start = self.0.begin();
        encode(&mut self.0.values);
        self.0.end(field.name(), start);
    }

    fn number(&mut self, field: &Field, value: impl serde::Serialize) {
        self.encode(field, |out| push_number(out, value));
    }
}

impl Visit for SpanVisitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.encode(field, |out| push_display(out, format_args!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.encode(field, |out| push_str(out, value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.number(field, value);
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.number(field, value);
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        self.encode(field, |out| {
            let _ = write!(out, "\"{value}\"");
        });
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        self.encode(field, |out| {
            let _ = write!(out, "\"{value}\"");
        });
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.number(field, value);
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.number(field, value);
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.encode(field, |out| push_display(out, format_args!("{value}")));
    }
}

/// The line's own keys; an event field of one of these names is written
/// as `field.<name>`.
const RESERVED: &[&str] = &["timestamp", "level", "target", "span"];

/// Writes an event's fields straight into its line, `,"name":value` each,
/// except the `log` crate's own (`log.target`, …), which the line's target
/// and level already say.
struct EventVisitor<'a> {
    out: &'a mut Vec<u8>,
    /// The event came from the `log` crate.
    from_log: bool,
}

impl EventVisitor<'_> {
    /// Writes `,"name":` and says whether the value follows; the `log`
    /// crate's own fields are left out.
    fn key(&mut self, field: &Field) -> bool {
        if self.from_log && field.name().starts_with("log.") {
            return false;
        }
        self.out.push(b',');
        let name = field.name();
        if RESERVED.contains(&name) {
            // An event's own `target` (say) must not shadow the line's.
            push_display(self.out, format_args!("field.{name}"));
        } else {
            push_str(self.out, name);
        }
        self.out.push(b':');
        true
    }
    fn raw(&mut self, field: &Field, value: fmt::Arguments<'_>) {
        if self.key(field) {
            let _ = self.out.write_fmt(value);
        }
    }
}

impl Visit for EventVisitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.key(field) {
            push_display(self.out, format_args!("{value:?}"));
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.key(field) {
            push_str(self.out, value);
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.raw(field, format_args!("{value}"));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.raw(field, format_args!("{value}"));
    }
    // As text: beyond 2^53 a JSON reader's number loses digits.
    fn record_i128(&mut self, field: &Field, value: i128) {
        self.raw(field, format_args!("\"{value}\""));
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        self.raw(field, format_args!("\"{value}\""));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        if self.key(field) {
            push_number(self.out, value);
        }
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.raw(field, format_args!("{value}"));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if self.key(field) {
            push_display(self.out, format_args!("{value}"));
        }
    }
}

/// The largest line buffer a thread keeps between lines.
const MAX_KEPT_BUFFER: usize = 64 * 1024;

thread_local! {
    /// Each thread's line buffer, reused line after line.
    static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// Each thread's list of a record's values, encoded before they are
    /// copied into their span's.
    static RECORDED: RefCell<SpanFields> = const { RefCell::new(SpanFields::new()) };
}

impl<S, W> Layer<S> for JsonLines<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + 'static,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        // Room for every field the span declares, the empty ones it
        // records later included.
        let mut fields = SpanFields::with_capacity(attrs.metadata().fields().len());
        attrs.record(&mut SpanVisitor(&mut fields));
        span.extensions_mut().insert(fields);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        // Encoded before the span's extensions are locked (a value's
        // `Debug` that logs in this span must not wait for that lock),
        // into the thread's scratch list, then copied.
        let merge = |recorded: &mut SpanFields| {
            recorded.clear();
            values.record(&mut SpanVisitor(recorded));
            let mut extensions = span.extensions_mut();
            if let Some(fields) = extensions.get_mut::<SpanFields>() {
                for (name, value) in recorded.iter() {
                    fields.set(name, value);
                }
            }
        };
        let merged = RECORDED.try_with(|recorded| match recorded.try_borrow_mut() {
            Ok(mut recorded) => {
                merge(&mut recorded);
                // A rare long value does not keep its buffer for the
                // thread's life.
                if recorded.values.capacity() > MAX_KEPT_BUFFER {
                    *recorded = SpanFields::new();
                }
            }
            // A value's `Debug` that records a span: a list of its own.
            Err(_) => merge(&mut SpanFields::new()),
        });
        // The thread is ending: its list is gone.
        if merged.is_err() {
            merge(&mut SpanFields::new());
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let write = |out: &mut Vec<u8>| {
            out.clear();
            // An event from the `log` crate (rustls, reqwest) names its real
            // target and level here, not `log`.
            let normalized = event.normalized_metadata();
            let metadata = normalized.as_ref().unwrap_or_else(|| event.metadata());
            out.extend_from_slice(br#"{"timestamp":""#);
            push_timestamp(out, std::time::SystemTime::now());
            out.extend_from_slice(br#"","level":""#);
            out.extend_from_slice(metadata.level().as_str().as_bytes());
            out.push(b'"');
            event.record(&mut EventVisitor {
                out,
                from_log: normalized.is_some(),
            });
            out.extend_from_slice(br#","target":"#);
            push_str(out, metadata.target());
            if let Some(span) = ctx.event_span(event) {
                out.extend_from_slice(br#","span":{"#);
                if let Some(fields) = span.extensions().get::<SpanFields>() {
                    for (name, value) in fields.iter() {
                        push_str(out, name);
                        out.push(b':');
                        out.extend_from_slice(value);
                        out.push(b',');
                    }
                }
                out.extend_from_slice(br#""name":"#);
                push_str(out, span.name());
                out.push(b'}');
            }
            out.extend_from_slice(b"}\n");
            // One write per line, so lines of different threads never mix.
            let _ = self.writer.make_writer_for(metadata).write_all(out);
            // A rare long line does not keep its buffer for the thread's life.
            if out.capacity() > MAX_KEPT_BUFFER {
                *out = Vec::new();
            }
        };
        LINE.with(|line| match line.try_borrow_mut() {
            Ok(mut line) => write(&mut line),
            // An event logged while this thread writes a line (a writer
            // that logs): a buffer of its own.
            Err(_) => write(&mut Vec::new()),
        });
    }
}

#[cfg(test)]
mod tests {
    use acdm_test_support::logs::LogCapture;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    #[test]
    fn numbers_are_padded_as_format_pads_them() {
        let mut values = vec![0, 1, 9, 10, 99, 100, 999_999, 1_000_000, u64::MAX];
        values.extend((0..64).map(|bit| 1_u64 << bit));
        values.extend((1..20).map(|power| 10_u64.pow(power) - 1));
        for value in values {
            for width in [0, 1, 2, 4, 6, 20, 22] {
                let mut ours = b"x".to_vec();
                push_padded(&mut ours, value, width);
                assert_eq!(
                    ours,
                    format!("x{value:0width$}").into_bytes(),
                    "{value} {width}"
                );
            }
        }
    }

    #[test]
    fn timestamps_are_what_chronos_format_writes() {
        let mut instants = vec![
            0,
            951_782_400,     // 2000-02-29
            1_709_164_800,   // 2024-02-29
            4_107_542_399,   // 2100-02-28T23:59:59
            4_107_542_400,   // 2100-03-01
            253_402_300_799, // 9999-12-31T23:59:59
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            instants.push(seed % 253_402_300_800);
        }
        for (n, seconds) in instants.into_iter().enumerate() {
            let micros = u32::try_from(n * 7919 % 1_000_000).unwrap();
            let at = std::time::UNIX_EPOCH + std::time::Duration::new(seconds, micros * 1000 + 999);
            let mut ours = Vec::new();
            push_timestamp(&mut ours, at);
            let expected = chrono::DateTime::<chrono::Utc>::from(at)
                .format("%Y-%m-%dT%H:%M:%S%.6fZ")
                .to_string();
            assert_eq!(String::from_utf8(ours).unwrap(), expected, "{seconds}");
        }
    }

    fn lines(run: impl FnOnce()) -> Vec<serde_json::Value> {
        let capture = LogCapture::default();
        let subscriber = tracing_subscriber::registry().with(JsonLines::new(capture.clone()));
        tracing::subscriber::with_default(subscriber, run);
        let text = capture.text();
        assert!(text.ends_with('\n'), "{text}");
        text.lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
            .collect()
    }

    #[test]
    fn a_line_is_one_object_with_the_event_and_its_spans_fields_typed() {
        let lines = lines(|| {
            let span = tracing::info_span!(
                "request",
                request_id = "r-1",
                method = %"POST",
                agent = tracing::field::Empty,
                status = tracing::field::Empty,
                latency_ms = tracing::field::Empty,
            );
            span.record("agent", "project-a");
            span.record("status", 200_u16);
            span.record("latency_ms", 1.5_f64);
            span.in_scope(|| tracing::info!(count = 3_i64, ok = true, "request finished"));
        });
        let [line] = lines.as_slice() else {
            panic!("{lines:?}")
        };
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["message"], "request finished");
        assert_eq!(line["count"], 3);
        assert_eq!(line["ok"], true);
        assert_eq!(line["target"], module_path!());
        let span = &line["span"];
        assert_eq!(span["name"], "request");
        assert_eq!(span["request_id"], "r-1");
        assert_eq!(span["method"], "POST");
        assert_eq!(span["agent"], "project-a");
        assert_eq!(span["status"], 200);
        assert_eq!(span["latency_ms"], 1.5);
        assert!(
            chrono::DateTime::parse_from_rfc3339(line["timestamp"].as_str().unwrap()).is_ok(),
            "{line}"
        );
    }

    #[test]
    fn a_field_recorded_again_is_replaced_and_one_never_recorded_is_left_out() {
        let capture = LogCapture::default();
        let subscriber = tracing_subscriber::registry().with(JsonLines::new(capture.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let span =
                tracing::info_span!("request", outcome = "first", user = tracing::field::Empty);
            span.record("outcome", "second");
            span.in_scope(|| tracing::warn!("done"));
        });
        let text = capture.text();
        assert_eq!(text.matches("\"outcome\"").count(), 1, "{text}");
        let line: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(line["span"]["outcome"], "second");
        assert!(line["span"].get("user").is_none(), "{line}");
        assert_eq!(line["level"], "WARN");
    }

    #[test]
    fn a_field_recorded_again_and_again_keeps_its_place_and_last_value_in_a_bounded_list() {
        let mut fields = super::SpanFields::new();
        fields.set("first", b"1");
        for i in 0..10_000 {
            fields.set("counter", format!("{i}").as_bytes());
            if i == 5 {
                fields.set("last", b"\"x\"");
            }
        }
        let listed: Vec<(&str, String)> = fields
            .iter()
            .map(|(name, value)| (name, String::from_utf8(value.to_vec()).unwrap()))
            .collect();
        assert_eq!(
            listed,
            [
                ("first", "1".to_owned()),
                ("counter", "9999".to_owned()),
                ("last", "\"x\"".to_owned())
            ]
        );
        assert!(
            fields.values.len() < 600,
            "{} bytes kept",
            fields.values.len()
        );
        // Through the layer: a span's non-finite number is null, and its
        // record in a line replaces the one it was opened with.
        let lines = lines(|| {
            let span = tracing::info_span!("request", latency_ms = 1.0, status = 1u64);
            span.record("latency_ms", f64::NAN);
            span.record("status", 200u64);
            span.in_scope(|| tracing::info!("done"));
        });
        assert_eq!(lines[0]["span"]["latency_ms"], serde_json::Value::Null);
        assert_eq!(lines[0]["span"]["status"], 200);
    }

    #[test]
    fn text_with_quotes_controls_and_line_breaks_stays_inside_its_string() {
        let hostile = "a\"b\\c\nd\re\u{1b}[31m\u{0}f</script>";
        let lines = lines(|| {
            let span = tracing::info_span!("request", path = hostile, shown = %hostile, later = tracing::field::Empty);
            span.record("later", tracing::field::debug(hostile));
            span.in_scope(|| tracing::error!(reason = %hostile, "{hostile}"));
        });
        let [line] = lines.as_slice() else {
            panic!("{lines:?}")
        };
        assert_eq!(line["message"], hostile);
        assert_eq!(line["reason"], hostile);
        assert_eq!(line["span"]["path"], hostile);
        assert_eq!(line["span"]["shown"], hostile);
        // Debug of a str quotes and escapes it once more, as format! does.
        assert_eq!(line["span"]["later"], format!("{hostile:?}"));
    }

    #[test]
    fn an_event_outside_any_span_has_no_span_and_non_finite_numbers_are_null() {
        let lines = lines(|| tracing::info!(ratio = f64::NAN, "alone"));
        let [line] = lines.as_slice() else {
            panic!("{lines:?}")
        };
        assert!(line.get("span").is_none(), "{line}");
        assert!(line["ratio"].is_null(), "{line}");
    }

    #[test]
    fn a_line_longer_than_the_kept_buffer_is_whole_and_the_next_line_too() {
        let long = "x".repeat(MAX_KEPT_BUFFER * 2);
        let lines = lines(|| {
            tracing::info!(detail = %long, "long");
            tracing::info!("short");
        });
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["detail"].as_str().map(str::len), Some(long.len()));
        assert_eq!(lines[1]["message"], "short");
    }

    #[test]
    fn an_event_of_the_log_crate_names_its_own_target_and_level() {
        let _ = tracing_log::LogTracer::init();
        let lines = lines(|| log::warn!(target: "rustls::client", "a warning from {}", "rustls"));
        let [line] = lines.as_slice() else {
            panic!("{lines:?}")
        };
        assert_eq!(line["target"], "rustls::client", "{line}");
        assert_eq!(line["level"], "WARN", "{line}");
        assert_eq!(line["message"], "a warning from rustls", "{line}");
        assert!(line.get("log.target").is_none(), "{line}");
    }

    #[test]
    fn an_event_field_named_like_a_key_of_the_line_does_not_shadow_it() {
        let lines =
            lines(|| tracing::info!(target = "notes/a.md", big = 1_u128 << 100, "recorded"));
        let [line] = lines.as_slice() else {
            panic!("{lines:?}")
        };
        assert_eq!(line["target"], module_path!(), "{line}");
        assert_eq!(line["field.target"], "notes/a.md", "{line}");
        assert_eq!(line["big"], (1_u128 << 100).to_string(), "{line}");
    }

    #[test]
    fn the_innermost_span_is_the_one_shown() {
        let lines = lines(|| {
            let outer = tracing::info_span!("request", request_id = "r-2");
            let inner = tracing::info_span!(parent: &outer, "mcp_tool", tool = "acdm_search_wiki");
            inner.in_scope(|| tracing::info!("tool call finished"));
            outer.in_scope(|| tracing::info!("request finished"));
        });
        assert_eq!(lines[0]["span"]["name"], "mcp_tool");
        assert_eq!(lines[0]["span"]["tool"], "acdm_search_wiki");
        assert_eq!(lines[1]["span"]["name"], "request");
        assert_eq!(lines[1]["span"]["request_id"], "r-2");
    }
}
