//! Building pages: every value goes through [`esc`] (HTML-escaped for
//! text and attribute values alike), and the layout links only the
//! console's own stylesheet — no script, no other host.

use std::fmt::Write as _;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// `text` escaped for HTML text and double-quoted attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

/// What [`query_value`] escapes: every byte but RFC 3986's unreserved
/// characters (letters, digits, `-`, `_`, `.`, `~`).
const NOT_UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// `text` as a URL query value or path segment (percent-encoded, then
/// safe in HTML: nothing but unreserved characters and `%` is left).
pub fn query_value(text: &str) -> String {
    utf8_percent_encode(text, NOT_UNRESERVED).to_string()
}

/// Who is signed in, for the navigation: the user, the session's CSRF
/// token (the sign-out form), and the approval requests waiting for a
/// decision, when known.
#[derive(Debug, Clone, Copy)]
pub struct SignedIn<'a> {
    /// The session's user.
    pub user: &'a str,
    /// The session's CSRF token.
    pub csrf: &'a str,
    /// Pending approval requests, all projects.
    pub pending_approvals: Option<u64>,
}

/// A whole page: the navigation (with the pending approvals' count and a
/// sign-out form when signed in), the title and `body` (already HTML).
pub fn page(title: &str, signed_in: Option<SignedIn<'_>>, body: &str) -> String {
    let nav = match signed_in {
        Some(SignedIn {
            user,
            csrf,
            pending_approvals,
        }) => format!(
            "<a href=\"/console/projects\">Projects</a>\
             <a href=\"/console/approvals\">Approvals{}</a>\
             <a href=\"/console/events\">Audit trail</a>\
             <a href=\"/console/kill-switch\">Kill switch</a>\
             <a href=\"/api-docs\">API</a>\
             <form method=\"post\" action=\"/console/sign-out\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <span>{}</span> <button type=\"submit\">Sign out</button></form>",
            match pending_approvals {
                Some(n) if n > 0 => format!(" <span class=\"count\">{n}</span>"),
                _ => String::new(),
            },
            esc(csrf),
            esc(user)
        ),
        None => String::new(),
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · acdm console</title>\
         <link rel=\"stylesheet\" href=\"/console/assets/console.css\"></head>\
         <body><header><a href=\"/console\">acdm console</a>{nav}</header>\
         <main><h1>{}</h1>\n{body}\n</main></body></html>\n",
        esc(title),
        esc(title)
    )
}

/// A hidden CSRF field.
pub fn csrf_field(csrf: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        esc(csrf)
    )
}

/// A table from a header row and rows of cells (already HTML).
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::from("<table><thead><tr>");
    for header in headers {
        let _ = write!(out, "<th>{}</th>", esc(header));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>");
    }
    if rows.is_empty() {
        let _ = write!(
            out,
            "<tr><td colspan=\"{}\">nothing here</td></tr>",
            headers.len()
        );
    }
    out.push_str("</tbody></table>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_are_escaped() {
        assert_eq!(
            esc("<script>alert('x')</script>&\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"
        );
        assert_eq!(query_value("a b&c=<d>"), "a%20b%26c%3D%3Cd%3E");
        assert_eq!(
            query_value("Az09-_.~+/%\"'é"),
            "Az09-_.~%2B%2F%25%22%27%C3%A9"
        );
        let page = page("<b>", None, "");
        assert!(page.contains("&lt;b&gt;") && !page.contains("<b>"));
        assert!(!page.contains("<script"));
    }
}
