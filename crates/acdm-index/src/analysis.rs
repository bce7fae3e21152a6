//! The two analyzers, for Chinese and English text alike: `zh_en` (words:
//! jieba for runs of Han characters, letters and digits for the rest,
//! lowercased and stemmed) and `bigram` (overlapping pairs of characters for
//! runs of Han, kana and hangul, so a word is found however jieba cut it; the
//! same words as `zh_en` for the rest). Queries go through the same
//! analyzers; the query-side stop words are here too.

use std::collections::{HashSet, VecDeque};
use std::sync::OnceLock;

use jieba_rs::Jieba;
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, Stemmer, TextAnalyzer, Token, TokenFilter, TokenStream,
    Tokenizer,
};

/// The name the `zh_en` analyzer is registered under.
pub(crate) const ZH_EN: &str = "acdm_zh_en";
/// The name the bigram analyzer is registered under.
pub(crate) const BIGRAM: &str = "acdm_bigram";

/// Tokens longer than this (in bytes) are dropped: a hash, a base64 blob or
/// a URL glued together, never a word anyone types (16 Han characters; no
/// jieba dictionary word is that long).
const MAX_TOKEN_BYTES: usize = 48;

/// The one jieba instance (its dictionary is about 350,000 words, loaded once).
fn jieba() -> &'static Jieba {
    static JIEBA: OnceLock<Jieba> = OnceLock::new();
    JIEBA.get_or_init(Jieba::new)
}

/// Loads jieba's dictionary now rather than at the first document or query.
pub(crate) fn warm_up() {
    let _ = jieba();
}

/// The `zh_en` analyzer: [`ZhEnTokenizer`], long tokens removed, lowercased,
/// English stemming (a Han token has no Latin suffix to strip: it passes
/// through unchanged).
pub(crate) fn zh_en_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(ZhEnTokenizer)
        .filter(RemoveLongFilter::limit(MAX_TOKEN_BYTES))
        .filter(LowerCaser)
        .filter(Stemmer::new(Language::English))
        .filter(NounSuffix)
        .build()
}

/// The bigram analyzer: [`BigramTokenizer`], then the same filters as
/// `zh_en` (which leave a pair of Han characters as it is).
pub(crate) fn bigram_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(BigramTokenizer)
        .filter(RemoveLongFilter::limit(MAX_TOKEN_BYTES))
        .filter(LowerCaser)
        .filter(Stemmer::new(Language::English))
        .filter(NounSuffix)
        .build()
}

/// Every token `analyzer` makes of `text`, in order.
pub(crate) fn tokens(analyzer: &mut TextAnalyzer, text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut stream = analyzer.token_stream(text);
    while let Some(token) = stream.next() {
        out.push(token.clone());
    }
    out
}

/// A Han ideograph (the CJK unified ideographs, their extensions and the
/// compatibility ideographs, and 〇).
pub(crate) fn is_han(c: char) -> bool {
    matches!(c,
        '\u{3007}'
        | '\u{3400}'..='\u{4DBF}'
        | '\u{4E00}'..='\u{9FFF}'
        | '\u{F900}'..='\u{FAFF}'
        | '\u{20000}'..='\u{2FA1F}'
        | '\u{30000}'..='\u{323AF}')
}

/// A character of a script written without spaces, cut into bigrams: Han,
/// kana, hangul.
pub(crate) fn is_bigram_script(c: char) -> bool {
    is_han(c)
        || matches!(c,
            '\u{3040}'..='\u{30FF}'
            | '\u{31F0}'..='\u{31FF}'
            | '\u{1100}'..='\u{11FF}'
            | '\u{3130}'..='\u{318F}'
            | '\u{AC00}'..='\u{D7AF}')
}

/// A character of a word outside the block scripts: a letter or digit of
/// any other script.
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() && !is_bigram_script(c)
}

/// Full-width ASCII letters and digits (`２０２６`, `ＩＳＯ`) as ASCII.
fn fold_width(c: char) -> char {
    match c {
        '\u{FF10}'..='\u{FF19}' | '\u{FF21}'..='\u{FF3A}' | '\u{FF41}'..='\u{FF5A}' => {
            char::from_u32(u32::from(c) - 0xFEE0).unwrap_or(c)
        }
        _ => c,
    }
}

/// One piece of text the scanner found.
enum Piece {
    /// A run of characters of the block scripts (byte range).
    Block(usize, usize),
    /// A word outside the blocks: byte range and its normalised text.
    Word(usize, usize, String),
}

/// The most characters of one piece: a longer run of Han characters (a
/// page without punctuation) is taken in slices, so the memory a text
/// needs stays bounded however long it is (a word cut at a slice's edge is
/// rare enough to lose); a longer word (a base64 blob) keeps only its
/// start, which is too long to be a token anyway.
const MAX_PIECE_CHARS: usize = 256;

/// The next piece of `text` from byte `*at` on (and `*at` moved past it):
/// a run of `is_block` characters, or a word of letters and digits;
/// everything else separates them. Inside a word, `.` and `,` between
/// digits (`3.5`, `1,250,000`; the comma dropped from the text) and an
/// apostrophe between letters (`supplier's`) do not end it.
fn next_piece(text: &str, at: &mut usize, is_block: fn(char) -> bool) -> Option<Piece> {
    let base = *at;
    let mut chars = text
        .get(base..)?
        .char_indices()
        .map(|(i, c)| (base + i, c))
        .peekable();
    while let Some((start, c)) = chars.next() {
        if is_block(c) {
            let mut end = start + c.len_utf8();
            let mut count = 1;
            while let Some(&(i, next)) = chars.peek() {
                if !is_block(next) || count >= MAX_PIECE_CHARS {
                    break;
                }
                end = i + next.len_utf8();
                count += 1;
                chars.next();
            }
            *at = end;
            return Some(Piece::Block(start, end));
        }
        if !is_word_char(c) {
            continue;
        }
        let mut word = String::new();
        word.push(fold_width(c));
        let mut end = start + c.len_utf8();
        let mut previous = c;
        let mut count = 1;
        while let Some(&(i, next)) = chars.peek() {
            if is_word_char(next) {
                // Past the limit the word is only skipped: its text is too
                // long to be kept anyway (see MAX_TOKEN_BYTES).
                if count < MAX_PIECE_CHARS {
                    word.push(fold_width(next));
                }
                end = i + next.len_utf8();
                previous = next;
                count += 1;
                chars.next();
                continue;
            }
            let after = text
                .get(i + next.len_utf8()..)
                .and_then(|rest| rest.chars().next());
            let joins = match (next, after) {
                ('.' | ',', Some(a)) => previous.is_numeric() && a.is_numeric(),
                ('\'' | '\u{2019}', Some(a)) => {
                    previous.is_alphabetic() && a.is_alphabetic() && !is_bigram_script(a)
                }
                _ => false,
            };
            if !joins {
                break;
            }
            match next {
                ',' => {}
                '.' => word.push('.'),
                _ => word.push('\''),
            }
            previous = next;
            chars.next();
        }
        *at = end;
        return Some(Piece::Word(start, end, word));
    }
    *at = text.len();
    None
}

/// After the Snowball stemmer, which leaves `delivery` as `deliveri` but
/// makes `deliver` `deliv`: a stem ending in `eri` loses it when three
/// letters stay (`deliveri`, `recoveri`, `machineri` → `deliv`, `recov`,
/// `machin`, the stems of `deliver`, `recover`, `machine`; `queri` stays).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NounSuffix;

impl TokenFilter for NounSuffix {
    type Tokenizer<T: Tokenizer> = NounSuffixFilter<T>;

    fn transform<T: Tokenizer>(self, tokenizer: T) -> NounSuffixFilter<T> {
        NounSuffixFilter(tokenizer)
    }
}

/// [`NounSuffix`] over a tokenizer.
#[derive(Clone, Debug)]
pub(crate) struct NounSuffixFilter<T>(T);

impl<T: Tokenizer> Tokenizer for NounSuffixFilter<T> {
    type TokenStream<'a> = NounSuffixStream<T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        NounSuffixStream(self.0.token_stream(text))
    }
}

/// [`NounSuffix`] over a token stream.
pub(crate) struct NounSuffixStream<S>(S);

impl<S: TokenStream> TokenStream for NounSuffixStream<S> {
    fn advance(&mut self) -> bool {
        if !self.0.advance() {
            return false;
        }
        let text = &mut self.0.token_mut().text;
        if text.len() >= 6 && text.ends_with("eri") && text.bytes().all(|b| b.is_ascii_lowercase())
        {
            text.truncate(text.len() - 3);
        }
        true
    }

    fn token(&self) -> &Token {
        self.0.token()
    }

    fn token_mut(&mut self) -> &mut Token {
        self.0.token_mut()
    }
}

/// How a tokenizer cuts the runs of the block scripts.
#[derive(Clone, Copy, Debug)]
enum Cut {
    /// Han runs into jieba's words (search mode).
    Words,
    /// Han, kana and hangul runs into overlapping character pairs.
    Bigrams,
}

/// The tokens of a text, made a piece at a time.
pub(crate) struct PieceStream<'a> {
    text: &'a str,
    at: usize,
    cut: Cut,
    pending: VecDeque<Token>,
    current: Token,
    position: usize,
}

impl<'a> PieceStream<'a> {
    fn new(text: &'a str, cut: Cut) -> Self {
        Self {
            text,
            at: 0,
            cut,
            pending: VecDeque::new(),
            current: Token::default(),
            position: 0,
        }
    }

    fn push(&mut self, offset_from: usize, offset_to: usize, text: String) {
        self.pending.push_back(Token {
            offset_from,
            offset_to,
            position: self.position,
            text,
            position_length: 1,
        });
        self.position += 1;
    }

    /// Queues the tokens of `piece`.
    fn fill(&mut self, piece: Piece) {
        match piece {
            Piece::Word(start, end, word) => self.push(start, end, word),
            Piece::Block(start, end) => {
                let run = self.text.get(start..end).unwrap_or_default();
                match self.cut {
                    Cut::Words => {
                        for word in jieba().cut_for_search(run, true) {
                            if word.word.chars().any(char::is_alphanumeric) {
                                self.push(
                                    start + word.byte_start,
                                    start + word.byte_end,
                                    word.word.to_owned(),
                                );
                            }
                        }
                    }
                    Cut::Bigrams => {
                        let mut chars = run.char_indices().peekable();
                        if let Some(&(_, only)) = chars.peek()
                            && only.len_utf8() == run.len()
                        {
                            self.push(start, end, only.to_string());
                            return;
                        }
                        while let Some((from, first)) = chars.next() {
                            let Some(&(at, second)) = chars.peek() else {
                                break;
                            };
                            let mut pair = String::with_capacity(8);
                            pair.push(first);
                            pair.push(second);
                            self.push(start + from, start + at + second.len_utf8(), pair);
                        }
                    }
                }
            }
        }
    }
}

impl TokenStream for PieceStream<'_> {
    fn advance(&mut self) -> bool {
        let is_block = match self.cut {
            Cut::Words => is_han,
            Cut::Bigrams => is_bigram_script,
        };
        while self.pending.is_empty() {
            let Some(piece) = next_piece(self.text, &mut self.at, is_block) else {
                return false;
            };
            self.fill(piece);
        }
        match self.pending.pop_front() {
            Some(token) => {
                self.current = token;
                true
            }
            None => false,
        }
    }

    fn token(&self) -> &Token {
        &self.current
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.current
    }
}

/// Words: jieba's search mode for each run of Han characters (a long word
/// also gives its dictionary words of two and three characters), letters
/// and digits for the rest. Punctuation and spaces give no token (jieba
/// alone would emit them, and would keep `late.` or `2026-03-12` whole).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ZhEnTokenizer;

impl Tokenizer for ZhEnTokenizer {
    type TokenStream<'a> = PieceStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> PieceStream<'a> {
        PieceStream::new(text, Cut::Words)
    }
}

/// Overlapping character pairs for each run of Han, kana or hangul (a run
/// of one character is itself), the same words as [`ZhEnTokenizer`] for
/// the rest; positions follow one another, so a phrase query over this
/// field asks for the characters in a row.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct BigramTokenizer;

impl Tokenizer for BigramTokenizer {
    type TokenStream<'a> = PieceStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> PieceStream<'a> {
        PieceStream::new(text, Cut::Bigrams)
    }
}

/// Words a query is better without: they are in every document, or they
/// are how a question is asked rather than what it asks. Dropped from a
/// query's terms unless nothing else is left.
const STOP_WORDS: &[&str] = &[
    // English.
    "a",
    "an",
    "the",
    "and",
    "or",
    "but",
    "if",
    "then",
    "else",
    "of",
    "to",
    "in",
    "on",
    "at",
    "by",
    "for",
    "with",
    "from",
    "as",
    "into",
    "about",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "am",
    "do",
    "does",
    "did",
    "have",
    "has",
    "had",
    "what",
    "which",
    "who",
    "whom",
    "whose",
    "when",
    "where",
    "why",
    "how",
    "this",
    "that",
    "these",
    "those",
    "it",
    "its",
    "i",
    "me",
    "my",
    "we",
    "us",
    "our",
    "you",
    "your",
    "he",
    "she",
    "they",
    "them",
    "their",
    "his",
    "her",
    "there",
    "here",
    "can",
    "could",
    "should",
    "would",
    "will",
    "shall",
    "may",
    "might",
    "must",
    "not",
    "no",
    "any",
    "some",
    "all",
    "so",
    "such",
    "than",
    "please",
    "find",
    "show",
    "tell",
    "give",
    "get",
    "s",
    "t",
    // Chinese.
    "的",
    "了",
    "是",
    "在",
    "和",
    "与",
    "及",
    "或",
    "或者",
    "吗",
    "呢",
    "吧",
    "啊",
    "么",
    "什么",
    "怎么",
    "怎样",
    "怎么样",
    "如何",
    "哪",
    "哪些",
    "哪里",
    "哪个",
    "哪儿",
    "为什么",
    "为何",
    "是否",
    "有没有",
    "有",
    "没有",
    "时候",
    "什么时候",
    "多少",
    "几",
    "谁",
    "我",
    "我们",
    "你",
    "你们",
    "他",
    "他们",
    "它",
    "这",
    "那",
    "这个",
    "那个",
    "这些",
    "那些",
    "请",
    "请问",
    "一下",
    "关于",
    "可以",
    "能",
    "会",
    "应该",
    "都",
    "也",
    "就",
    "还",
    "把",
    "被",
    "对",
    "给",
    "让",
    "要",
    "找",
    "查",
    "查找",
    "告诉",
];

/// The stop words as the `zh_en` analyzer gives them (stemmed), so they
/// can be compared with a query's terms.
pub(crate) fn is_stop_word(term: &str) -> bool {
    static ANALYZED: OnceLock<HashSet<String>> = OnceLock::new();
    ANALYZED
        .get_or_init(|| {
            let mut analyzer = zh_en_analyzer();
            let mut set = HashSet::new();
            for word in STOP_WORDS {
                set.insert((*word).to_owned());
                for token in tokens(&mut analyzer, word) {
                    set.insert(token.text);
                }
            }
            set
        })
        .contains(term)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
        tokens(analyzer, text).into_iter().map(|t| t.text).collect()
    }

    #[test]
    fn english_words_are_lowercased_and_stemmed() {
        let mut a = zh_en_analyzer();
        assert_eq!(
            texts(&mut a, "Delivered late. Deliveries, DELIVERY"),
            ["deliv", "late", "deliv", "deliv"]
        );
        assert_eq!(texts(&mut a, "deliver"), ["deliv"]);
        assert_eq!(
            texts(&mut a, "query queries machinery machine"),
            ["queri", "queri", "machin", "machin"]
        );
    }

    #[test]
    fn han_tokens_pass_the_stemmer_unchanged() {
        let mut a = zh_en_analyzer();
        let text = "钢结构工程进度款支付，业主于三月底前付清";
        let jieba_words: Vec<String> = jieba()
            .cut_for_search(text, true)
            .into_iter()
            .map(|t| t.word.to_owned())
            .filter(|w| w.chars().all(is_han))
            .collect();
        let words = texts(&mut a, text);
        assert_eq!(words, jieba_words);
        assert!(words.contains(&"钢结构".to_owned()), "{words:?}");
    }

    #[test]
    fn punctuation_and_spaces_give_no_token() {
        let mut a = zh_en_analyzer();
        assert!(texts(&mut a, " ，。！？ - \"\" *** :: ").is_empty());
        assert_eq!(texts(&mut a, "2026-03-12"), ["2026", "03", "12"]);
    }

    #[test]
    fn numbers_keep_their_decimal_point_and_lose_thousands_separators() {
        let mut a = zh_en_analyzer();
        assert_eq!(
            texts(&mut a, "1,250,000 and 3.5 m"),
            ["1250000", "and", "3.5", "m"]
        );
        assert_eq!(texts(&mut a, "the end."), ["the", "end"]);
    }

    #[test]
    fn an_apostrophe_inside_a_word_keeps_it_whole() {
        let mut a = zh_en_analyzer();
        assert_eq!(
            texts(&mut a, "the supplier's obligations"),
            ["the", "supplier", "oblig"]
        );
    }

    #[test]
    fn full_width_letters_and_digits_read_as_ascii() {
        let mut a = zh_en_analyzer();
        assert_eq!(texts(&mut a, "２０２６年ＩＳＯ"), ["2026", "年", "iso"]);
    }

    #[test]
    fn offsets_point_at_the_token_in_the_text() {
        let mut a = zh_en_analyzer();
        let text = "合同约定：Supplier 延迟交货，每日罚款。";
        for t in tokens(&mut a, text) {
            let original = text.get(t.offset_from..t.offset_to).unwrap_or_default();
            assert!(!original.is_empty(), "{t:?}");
            let first = original
                .chars()
                .next()
                .map(|c| c.to_lowercase().to_string());
            assert_eq!(first, t.text.chars().next().map(String::from), "{t:?}");
        }
    }

    #[test]
    fn bigrams_cover_han_runs_and_words_stay_words() {
        let mut a = bigram_analyzer();
        assert_eq!(
            texts(&mut a, "钢材到货 on Monday，好"),
            ["钢材", "材到", "到货", "on", "monday", "好"]
        );
        let positions: Vec<usize> = tokens(&mut a, "钢材到货 x")
            .iter()
            .map(|t| t.position)
            .collect();
        assert_eq!(positions, [0, 1, 2, 3]);
    }

    #[test]
    fn a_very_long_run_is_taken_in_slices_with_true_offsets() {
        let text = "钢材到货".repeat(300);
        let mut a = bigram_analyzer();
        let all = tokens(&mut a, &text);
        // One pair lost at each slice's edge, no more.
        assert!(all.len() >= text.chars().count() - 1 - 5, "{}", all.len());
        for t in &all {
            assert_eq!(text.get(t.offset_from..t.offset_to), Some(t.text.as_str()));
        }
        let mut z = zh_en_analyzer();
        let words = tokens(&mut z, &text);
        assert!(words.iter().filter(|t| t.text == "钢材").count() >= 290);
        let long_word = "a".repeat(10_000);
        assert!(tokens(&mut z, &long_word).is_empty());
    }

    #[test]
    fn stop_words_are_recognised_after_analysis() {
        assert!(is_stop_word("the"));
        assert!(is_stop_word("什么"));
        assert!(is_stop_word("doe")); // "does", stemmed
        assert!(!is_stop_word("钢材"));
        assert!(!is_stop_word("deliv"));
    }
}
