//! One escaping function per output form, for every string that can come
//! from a package, a log or a rule file: file and folder names, benchmark,
//! organisation, system and submitter names, MLLOG keys and values, the
//! text of diagnostics and of errors that quote their input.
//!
//! Such a string is hostile input. Printed raw it can rewrite what a
//! reviewer sees: a carriage return and a cursor escape in a file name draw
//! a forged `PASS` line over a failure; a `|` and a newline in a table cell
//! end the row and start a Markdown heading or HTML; a cell that starts with
//! `=` is a live spreadsheet formula. Each printer passes such strings
//! through the function of its form here, and through no other copy:
//!
//! * [`term`] — one field on one line of a terminal; [`term_text`] — a
//!   block of text whose line breaks are its own (program output, an error
//!   message);
//! * [`markdown`] — inline text and table cells; [`markdown_code`] — a code
//!   span; [`markdown_code_block`] — a fenced block of lines;
//! * [`html`] — element text and double-quoted attribute values;
//! * [`csv_cell`] — one CSV field.
//!
//! Every function returns its input unchanged (borrowed) when nothing in it
//! needs escaping, so ordinary names (`result_0.txt`, `NVIDIA`, `bert`,
//! `Ünïcode`) print byte for byte as before.

use std::borrow::Cow;
use std::fmt::Write as _;

/// A character a terminal must not receive raw: it moves the cursor,
/// erases, starts an escape sequence, rings, reorders the text around it
/// or is invisible. C0 controls (tab and line feed included: callers that
/// keep them say so), DEL, C1 controls, and the format characters of
/// Unicode (general category Cf: bidirectional overrides and isolates,
/// zero-width characters, the soft hyphen, tags) with the line and
/// paragraph separators.
fn is_unsafe(c: char) -> bool {
    matches!(
        c,
        '\0'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{ad}'
            | '\u{600}'..='\u{605}'
            | '\u{61c}'
            | '\u{6dd}'
            | '\u{70f}'
            | '\u{890}'..='\u{891}'
            | '\u{8e2}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{110bd}'
            | '\u{110cd}'
            | '\u{13430}'..='\u{1343f}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0001}'
            | '\u{e0020}'..='\u{e007f}'
    )
}

/// The visible form of an unsafe character: `\r`, `\n`, `\t`, `\x1b` for
/// the other C0 controls and DEL, `\u{85}` / `\u{202e}` for the rest.
fn push_visible(out: &mut String, c: char) {
    match c {
        '\r' => out.push_str("\\r"),
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\0'..='\u{1f}' | '\u{7f}' => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        _ => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// `s` with every character for which `unsafe_` holds replaced by `each`'s
/// output; borrowed when there is none.
fn replace_chars(
    s: &str,
    unsafe_: impl Fn(char) -> bool,
    each: impl Fn(&mut String, char),
) -> Cow<'_, str> {
    let Some(first) = s.find(&unsafe_) else {
        return Cow::Borrowed(s);
    };
    let mut out = String::with_capacity(s.len() + 8);
    out.push_str(&s[..first]);
    for c in s[first..].chars() {
        if unsafe_(c) {
            each(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A one-line field for a terminal: every control character (line feed
/// and tab included, so that a field can neither start a line of its own
/// nor shift the columns after it), DEL, C1 control and invisible format
/// character is shown as a visible escape (`\r`, `\x1b`, `\u{202e}`).
/// Invalid UTF-8 has already become U+FFFD where the string was made
/// (`Path::display`, `String::from_utf8_lossy`).
pub fn term(s: &str) -> Cow<'_, str> {
    replace_chars(s, is_unsafe, push_visible)
}

/// A block of text for a terminal whose line breaks are its own (a
/// program's output, a message of several lines): as [`term`], but line
/// feeds and tabs are kept (they start a line or add blank space; neither
/// can overwrite or hide what is already shown).
pub fn term_text(s: &str) -> Cow<'_, str> {
    replace_chars(s, |c| is_unsafe(c) && c != '\n' && c != '\t', push_visible)
}

/// Characters that Markdown (CommonMark with the GitHub extensions) can
/// read as markup anywhere in a line: escapes, table cell borders,
/// emphasis and strike-through, code spans, links and images, raw HTML and
/// autolinks, entity references, headings and block quotes.
const MARKDOWN_PUNCT: &[char] = &[
    '\\', '|', '*', '_', '`', '[', ']', '<', '>', '#', '!', '~', '&',
];

/// Inline Markdown text or a table cell: each of `` \ | * _ ` # ! ~ `` is
/// backslash-escaped and `&`, `<`, `>` become entities (so each renders as
/// itself, never as markup: entities also where a renderer such as
/// Python-Markdown does not read `\<` as an escape), line feeds become
/// spaces (nothing can end a table row or start a heading, a list or an
/// HTML block), and the characters [`term`] escapes are shown the same way
/// (a Markdown file is read on terminals too). Where the text may begin a
/// line (a list item's text), what would start a block there is escaped
/// too: a leading `- ` or `+ `, a line of `-` or `=`, the `.` or `)` of a
/// leading number.
///
/// Brackets are escaped where they could make a link: `](` and `][`,
/// `[[`, and a leading `[` that could define a link reference (`[x]: …`)
/// or tick a task-list box (`[x] …`). With no reference definition in the
/// file, a `[label]` elsewhere is text (referee's own sentences show units
/// and intervals that way: `CI [-28.5 %, -23.4 %]`).
///
/// Two things stay as they are, because Markdown reads nothing in them:
/// an underscore between two letters or digits (never emphasis; file names
/// are full of them, `result_0.txt`), and a code span of single backticks
/// around text with no backtick, `|` or control character in it and no `<`
/// that could open a tag (the diagnostics quote keys and rules that way:
/// ``no `eval_accuracy` line satisfies `v >= 0.72 and v < 1.0` ``). Inside
/// such a span `*` or `[` are shown as text, and it cannot be closed early:
/// a one-backtick span closes at the next run of exactly one backtick,
/// which is the one this function saw.
pub fn markdown(s: &str) -> Cow<'_, str> {
    let special = |c: char| is_unsafe(c) || MARKDOWN_PUNCT.contains(&c);
    let leading = s.trim_start_matches(' ');
    let block_start = starts_block(&leading.chars().collect::<Vec<_>>())
        || leading
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .len()
            < leading.len();
    if !s.contains(special) && !block_start {
        return Cow::Borrowed(s);
    }
    let chars: Vec<char> = s.chars().collect();
    let start = chars.iter().take_while(|&&c| c == ' ').count();
    let mut out = String::with_capacity(s.len() + 8);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if (c == '[' || c == ']') && !bracket_links(&chars, i, start) {
            out.push(c);
            i += 1;
            continue;
        }
        if i == start && starts_block(&chars[start..]) || starts_ordered_item(&chars, i, start) {
            out.push('\\');
            out.push(c);
            i += 1;
            continue;
        }
        if c == '`'
            && let Some(end) = code_span_end(&chars, i)
        {
            out.extend(&chars[i..=end]);
            i = end + 1;
            continue;
        }
        if c == '_' {
            let before = i.checked_sub(1).map(|j| chars[j]);
            let after = chars.get(i + 1).copied();
            if before.is_some_and(char::is_alphanumeric) && after.is_some_and(char::is_alphanumeric)
            {
                out.push('_');
                i += 1;
                continue;
            }
        }
        if c == '\n' {
            out.push(' ');
        } else if is_unsafe(c) {
            // `\x1b` must render with its backslash.
            out.push('\\');
            push_visible(&mut out, c);
        } else if let Some(entity) = html_entity(c) {
            out.push_str(entity);
        } else if MARKDOWN_PUNCT.contains(&c) {
            out.push('\\');
            out.push(c);
        } else {
            out.push(c);
        }
        i += 1;
    }
    if out == s {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(out)
    }
}

/// Could the bracket at `i` make a link (see [`markdown`])? `start`: where
/// the text begins after its leading spaces.
fn bracket_links(chars: &[char], i: usize, start: usize) -> bool {
    let next = chars.get(i + 1).copied();
    if chars[i] == ']' {
        return matches!(next, Some('(' | '['));
    }
    if next == Some('[') || (i > 0 && chars[i - 1] == ']') {
        return true;
    }
    if i != start {
        return false;
    }
    match chars[i + 1..].iter().position(|&c| c == ']') {
        None => true,
        Some(n) => {
            let label = &chars[i + 1..i + 1 + n];
            chars.get(i + 2 + n) == Some(&':') || matches!(label, [' ' | 'x' | 'X'])
        }
    }
}

/// Would `text`, at the start of a line, begin a bullet list item (`-` or
/// `+` and a space), a thematic break (`---`) or a setext heading's
/// underline (`===`)?
fn starts_block(text: &[char]) -> bool {
    match text {
        ['-' | '+'] | ['-' | '+', ' ' | '\t', ..] => true,
        [c @ ('-' | '='), rest @ ..] => rest.iter().all(|x| x == c || *x == ' '),
        _ => false,
    }
}

/// Is `chars[i]` the `.` or `)` of a number that begins the text (after
/// `start` spaces) and is followed by a space or the end: an ordered list
/// item where the text begins a line.
fn starts_ordered_item(chars: &[char], i: usize, start: usize) -> bool {
    matches!(chars[i], '.' | ')')
        && i > start
        && chars[start..i].iter().all(char::is_ascii_digit)
        && chars.get(i + 1).is_none_or(|&c| c == ' ')
}

/// Where the code span opened by the lone backtick at `open` closes: the
/// next backtick, when it is lone too and what lies between is not empty
/// and holds no `|` (a table cell would still end there), nothing [`term`]
/// escapes and no `<` before a letter, `/`, `!` or `?` (the start of a tag:
/// inert inside a span, but no reader of the file should meet one).
fn code_span_end(chars: &[char], open: usize) -> Option<usize> {
    let lone = |i: usize| {
        chars[i] == '`'
            && (i == 0 || chars[i - 1] != '`')
            && chars.get(i + 1).is_none_or(|&c| c != '`')
    };
    if !lone(open) {
        return None;
    }
    let close = open + 1 + chars[open + 1..].iter().position(|&c| c == '`')?;
    let body = &chars[open + 1..close];
    let plain = !body.is_empty()
        && !body.iter().any(|&c| c == '|' || is_unsafe(c))
        && !body.windows(2).any(|w| opens_tag(w[0], w[1]));
    (plain && lone(close)).then_some(close)
}

/// `c` followed by `next` could start an HTML tag, comment, declaration or
/// processing instruction.
fn opens_tag(c: char, next: char) -> bool {
    c == '<' && (next.is_ascii_alphabetic() || matches!(next, '/' | '!' | '?'))
}

/// A Markdown code span holding `s` (the backticks included), for inline
/// text (not a table cell, where a `|` would still split the cell). The
/// fence is one backtick longer than the longest run of backticks in `s`,
/// so none of them can close it; a space pads a content that begins or
/// ends with a backtick; line feeds become spaces and the characters
/// [`term`] escapes are shown as its escapes. A content with a `<` that
/// could open a tag is given as [`markdown`] text instead: inert inside a
/// span, but no reader of the file should meet one.
pub fn markdown_code(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    if chars.windows(2).any(|w| opens_tag(w[0], w[1])) {
        return markdown(s).into_owned();
    }
    let body = replace_chars(s, is_unsafe, |out, c| {
        if c == '\n' {
            out.push(' ');
        } else {
            push_visible(out, c);
        }
    });
    let mut longest = 0;
    let mut run = 0;
    for c in body.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if body.starts_with('`')
        || body.ends_with('`')
        || (body.len() > 1
            && body.starts_with(' ')
            && body.ends_with(' ')
            && body.contains(|c| c != ' '))
    {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{body}{pad}{fence}")
}

/// A fenced Markdown code block (`info` after the opening fence) holding
/// the lines of `text`: its fence is longer than any run of backticks in
/// `text` (three at least), so no line of it can close the block early and
/// turn what follows into Markdown; the characters [`term_text`] escapes
/// are shown as its escapes, and so is a `<` that could open a tag
/// (`\u{3c}`: inert inside the block, but no reader of the file should
/// meet one).
pub fn markdown_code_block(info: &str, text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut body = String::with_capacity(text.len());
    for (i, &c) in chars.iter().enumerate() {
        let tag = chars.get(i + 1).is_some_and(|&n| opens_tag(c, n));
        if tag || (is_unsafe(c) && c != '\n' && c != '\t') {
            push_visible(&mut body, c);
        } else {
            body.push(c);
        }
    }
    let mut longest = 0;
    let mut run = 0;
    for c in body.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    let newline = if body.is_empty() || body.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    format!("{fence}{}\n{body}{newline}{fence}", term(info))
}

/// The entity of a character that opens markup in HTML (and so in
/// Markdown): `&`, `<`, `>`.
fn html_entity(c: char) -> Option<&'static str> {
    match c {
        '&' => Some("&amp;"),
        '<' => Some("&lt;"),
        '>' => Some("&gt;"),
        _ => None,
    }
}

/// HTML element text or a double-quoted attribute value: `& < > "` become
/// entities. Every attribute referee writes is double-quoted, so `'` stays
/// as it is (it would need escaping inside single quotes only).
pub fn html(s: &str) -> Cow<'_, str> {
    replace_chars(
        s,
        |c| matches!(c, '&' | '<' | '>' | '"'),
        |out, c| out.push_str(html_entity(c).unwrap_or("&quot;")),
    )
}

/// One CSV field (RFC 4180), safe to open in a spreadsheet.
///
/// * A field that begins with `=`, `+`, `-`, `@`, a tab or a carriage
///   return gets a leading `'`: spreadsheets read such a cell as a formula,
///   and a formula can fetch a URL or run a command when the reviewer opens
///   the file (CSV injection, as OWASP names it). A plain decimal number
///   (`-1.5`, `+3e-2`) is a value, not a formula, and stays as it is.
/// * The characters [`term`] escapes are shown as its escapes (the CSV is
///   printed on a terminal as often as it is opened in a spreadsheet), so a
///   field never holds a raw line break.
/// * A field holding `,` or `"` is quoted, its quotes doubled.
pub fn csv_cell(s: &str) -> Cow<'_, str> {
    let formula = s.starts_with(['=', '+', '-', '@', '\t', '\r']) && !is_decimal(s);
    let shown = term(s);
    let quote = shown.contains([',', '"']);
    if !formula && !quote {
        return shown;
    }
    let mut out = String::with_capacity(shown.len() + 4);
    if quote {
        out.push('"');
    }
    if formula {
        out.push('\'');
    }
    if quote {
        out.push_str(&shown.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(&shown);
    }
    Cow::Owned(out)
}

/// `s` is a decimal number in the plain form spreadsheets read as a value:
/// an optional sign, digits with at most one point, an optional exponent.
fn is_decimal(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let mut digits = 0;
    let mut point = false;
    while i < b.len() {
        match b[i] {
            b'0'..=b'9' => digits += 1,
            b'.' if !point => point = true,
            _ => break,
        }
        i += 1;
    }
    if digits == 0 {
        return false;
    }
    if i < b.len() && matches!(b[i], b'e' | b'E') {
        i += 1;
        if i < b.len() && matches!(b[i], b'+' | b'-') {
            i += 1;
        }
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    i == b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names as honest packages have them.
    const ORDINARY: &[&str] = &[
        "result_0.txt",
        "NVIDIA",
        "bert",
        "llama2_70b_lora",
        "MI300X_EPYC_9575F_pytorch",
        "/srv/training_results_v5.0/AMD/results/x/bert/result_9.txt",
        "Ünïcode",
        "dgx-h100 (8x H100-SXM5-80GB)",
        "日本語のシステム",
        "",
    ];

    #[test]
    fn every_form_is_the_identity_on_ordinary_names() {
        for s in ORDINARY {
            assert!(matches!(term(s), Cow::Borrowed(_)), "term {s:?}");
            assert!(matches!(term_text(s), Cow::Borrowed(_)), "term_text {s:?}");
            assert!(matches!(markdown(s), Cow::Borrowed(_)), "markdown {s:?}");
            assert!(matches!(html(s), Cow::Borrowed(_)), "html {s:?}");
            assert!(matches!(csv_cell(s), Cow::Borrowed(_)), "csv {s:?}");
            assert_eq!(term(s), *s);
            assert_eq!(markdown(s), *s);
            assert_eq!(csv_cell(s), *s);
        }
    }

    /// What a terminal would act on: any C0 control, DEL, C1 control or
    /// invisible format character.
    fn has_raw_control(s: &str) -> bool {
        s.chars().any(is_unsafe)
    }

    #[test]
    fn term_shows_the_forged_pass_line_as_escapes() {
        let attack = "\r\x1b[2K  PASS result_0.txt\n1 log checked: 1 PASS, 0 FAIL\x07\x08\x7f";
        let shown = term(attack);
        assert_eq!(
            shown,
            "\\r\\x1b[2K  PASS result_0.txt\\n1 log checked: 1 PASS, 0 FAIL\\x07\\x08\\x7f"
        );
        assert!(!has_raw_control(&shown));
        assert!(!shown.contains('\n'));
    }

    #[test]
    fn term_shows_c1_controls_bidi_and_invisible_characters() {
        assert_eq!(term("a\u{202e}txt.exe"), "a\\u{202e}txt.exe");
        assert_eq!(term("\u{9b}2J"), "\\u{9b}2J");
        assert_eq!(term("\u{85}"), "\\u{85}");
        for c in [
            '\u{202a}',
            '\u{202b}',
            '\u{202c}',
            '\u{202d}',
            '\u{2066}',
            '\u{2067}',
            '\u{2068}',
            '\u{2069}',
            '\u{200b}',
            '\u{200e}',
            '\u{200f}',
            '\u{feff}',
            '\u{ad}',
            '\u{2028}',
            '\u{2029}',
            '\u{e0041}',
        ] {
            let s = format!("x{c}y");
            let shown = term(&s);
            assert_eq!(shown, format!("x\\u{{{:x}}}y", c as u32));
        }
        assert_eq!(term("tab\there"), "tab\\there");
        assert_eq!(term("nul\0"), "nul\\x00");
    }

    #[test]
    fn term_text_keeps_its_line_breaks_and_nothing_else() {
        assert_eq!(
            term_text("line 1\n\tline 2\r\x1b[1A"),
            "line 1\n\tline 2\\r\\x1b[1A"
        );
    }

    #[test]
    fn markdown_keeps_a_file_name_in_its_cell() {
        let attack = "x|y\n# All logs PASS";
        let shown = markdown(attack);
        assert_eq!(shown, "x\\|y \\# All logs PASS");
        assert!(!shown.contains('\n'));
        // No `|` that is not escaped: the row keeps its cells.
        assert!(!shown.replace("\\|", "").contains('|'));
    }

    #[test]
    fn markdown_makes_html_and_images_text() {
        assert_eq!(
            markdown("<img src=http://evil>"),
            "&lt;img src=http://evil&gt;"
        );
        assert_eq!(
            markdown("![x](http://evil/p.png)"),
            "\\![x\\](http://evil/p.png)"
        );
        assert_eq!(markdown("&#x202e;"), "&amp;\\#x202e;");
        assert_eq!(markdown("a\r\x1b[2Kb"), "a\\\\r\\\\x1b[2Kb");
        assert_eq!(markdown("\u{202e}"), "\\\\u{202e}");
        assert_eq!(
            markdown("**PASS** ~~y~~ \\"),
            "\\*\\*PASS\\*\\* \\~\\~y\\~\\~ \\\\"
        );
    }

    #[test]
    fn markdown_keeps_plain_code_spans_and_escapes_the_rest() {
        // As the diagnostics write them: unchanged.
        let honest = "no `eval_accuracy` line satisfies `(v['value'] >= 0.720) and v['value'] < 1.0` (16 lines checked)";
        assert_eq!(markdown(honest), honest);
        let honest = "`(0.0 <= v['value']['FID'] <= 90.0)` and `x < 1`";
        assert_eq!(markdown(honest), honest);
        // A span that holds a tag is not kept: it is text.
        assert_eq!(markdown("`<script>` <b>"), "\\`&lt;script&gt;\\` &lt;b&gt;");
        assert_eq!(markdown("`a </b> c`"), "\\`a &lt;/b&gt; c\\`");
        assert_eq!(markdown("`<!-- x`"), "\\`&lt;\\!-- x\\`");
        // Not a span: a lone backtick, double backticks, a pipe or a line
        // break inside, an empty span.
        assert_eq!(markdown("a ` b"), "a \\` b");
        assert_eq!(markdown("``x`` <i>"), "\\`\\`x\\`\\` &lt;i&gt;");
        assert_eq!(markdown("`x|y`"), "\\`x\\|y\\`");
        assert_eq!(markdown("`x\n# h`"), "\\`x \\# h\\`");
        assert_eq!(markdown("``"), "\\`\\`");
        // A span cannot swallow a backslash escape before it.
        assert_eq!(markdown("\\`x`"), "\\\\`x`");
        // Three backticks: the middle one does not pair twice.
        assert_eq!(markdown("`a`b` <i>"), "`a`b\\` &lt;i&gt;");
    }

    #[test]
    fn markdown_escapes_brackets_that_could_make_a_link() {
        // Text: no reference definition can exist, none of these links.
        for honest in [
            "CI [-28.5 %, -23.4 %], p = 0.0002",
            "[-28.5 %, -23.4 %]",
            "samples to converge [samples]: baseline 3072.0",
            "a [b] c",
        ] {
            assert_eq!(markdown(honest), honest);
        }
        assert_eq!(markdown("[a](http://evil)"), "[a\\](http://evil)");
        assert_eq!(markdown("see [x][y]"), "see [x\\]\\[y]");
        assert_eq!(markdown("[[wiki]]"), "\\[[wiki]]");
        // A definition or a task-list box where the text begins a line.
        assert_eq!(markdown("[x]: http://evil"), "\\[x]: http://evil");
        assert_eq!(markdown("  [^1]: http://evil"), "  \\[^1]: http://evil");
        assert_eq!(markdown("[x] PASS"), "\\[x] PASS");
        assert_eq!(markdown("[ ] b"), "\\[ ] b");
        assert_eq!(markdown("[unclosed"), "\\[unclosed");
    }

    #[test]
    fn markdown_escapes_what_would_start_a_block_where_it_begins_a_line() {
        assert_eq!(markdown("- PASS"), "\\- PASS");
        assert_eq!(markdown("+ x"), "\\+ x");
        assert_eq!(markdown("==="), "\\===");
        assert_eq!(markdown("---"), "\\---");
        assert_eq!(markdown("1. PASS"), "1\\. PASS");
        assert_eq!(markdown("12) x"), "12\\) x");
        assert_eq!(markdown("1."), "1\\.");
        // Not at the start, or not a list marker: text.
        assert_eq!(markdown("-"), "\\-");
        assert_eq!(markdown("- - -"), "\\- - -");
        for honest in [
            "a - b",
            "29.250",
            "1.5 %",
            "bert-large",
            "x = 1",
            "-24.7 %: x",
            "-cmd",
            "+1.6 %",
            "==x",
        ] {
            assert_eq!(markdown(honest), honest);
        }
    }

    #[test]
    fn markdown_escapes_an_underscore_that_could_start_emphasis() {
        assert_eq!(markdown("_PASS_"), "\\_PASS\\_");
        assert_eq!(markdown("a _b_ c"), "a \\_b\\_ c");
        assert_eq!(markdown("a__b"), "a\\_\\_b");
        assert_eq!(markdown("eval_accuracy"), "eval_accuracy");
    }

    #[test]
    fn markdown_code_cannot_be_closed_from_inside() {
        assert_eq!(markdown_code("result_0.txt"), "`result_0.txt`");
        assert_eq!(markdown_code("a`b"), "``a`b``");
        assert_eq!(markdown_code("`x``"), "``` `x`` ```");
        assert_eq!(markdown_code("x\n# h"), "`x # h`");
        assert_eq!(markdown_code("\x1b[2K"), "`\\x1b[2K`");
        assert_eq!(markdown_code(" a "), "`  a  `");
        assert_eq!(markdown_code(" "), "` `");
        assert_eq!(markdown_code("a <= b"), "`a <= b`");
        assert_eq!(markdown_code("x<img src=y>"), "x&lt;img src=y&gt;");
    }

    #[test]
    fn markdown_code_block_cannot_be_closed_from_inside() {
        assert_eq!(
            markdown_code_block("text", "  command: x\n"),
            "```text\n  command: x\n```"
        );
        let attack = "  x\n```\n# Verdict\n\n**PASS**\n````\n";
        let block = markdown_code_block("text", attack);
        assert!(block.starts_with("`````text\n"), "{block}");
        assert!(block.ends_with("\n`````"), "{block}");
        assert_eq!(markdown_code_block("", "a\x1b[2Jb"), "```\na\\x1b[2Jb\n```");
        assert_eq!(
            markdown_code_block("text", "v < 1 <img src=x>\n"),
            "```text\nv < 1 \\u{3c}img src=x>\n```"
        );
    }

    #[test]
    fn html_makes_markup_text() {
        assert_eq!(
            html("<img src=\"http://evil\">&amp;"),
            "&lt;img src=&quot;http://evil&quot;&gt;&amp;amp;"
        );
        assert_eq!(html("it's"), "it's");
    }

    #[test]
    fn csv_neutralises_formulas_and_quotes() {
        assert_eq!(
            csv_cell("=HYPERLINK(\"http://evil\",\"x\")"),
            "\"'=HYPERLINK(\"\"http://evil\"\",\"\"x\"\")\""
        );
        assert_eq!(csv_cell("-cmd"), "'-cmd");
        assert_eq!(csv_cell("@SUM(1)"), "'@SUM(1)");
        assert_eq!(csv_cell("+1+1"), "'+1+1");
        assert_eq!(csv_cell("\t=1"), "'\\t=1");
        assert_eq!(csv_cell("\r=1"), "'\\r=1");
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_cell("two\nlines"), "two\\nlines");
        assert_eq!(csv_cell("x\x1b[2J"), "x\\x1b[2J");
    }

    #[test]
    fn csv_leaves_numbers_as_numbers() {
        for n in ["-1.5", "+3e-2", "-0", "12", "-7.25E+10", "0.5"] {
            assert_eq!(csv_cell(n), n);
        }
        for s in ["-", "-.", "-1e", "-1.2.3", "-1+2", "-inf", "-NaN"] {
            assert_eq!(csv_cell(s), format!("'{s}"), "{s:?}");
        }
    }
}
