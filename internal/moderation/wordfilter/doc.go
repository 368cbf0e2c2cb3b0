// Package wordfilter is Parley's built-in word filter: lists of words and
// phrases, each list with an action, matched against message text after
// both are normalized the same way.
//
// It is a library and nothing more: no I/O, no goroutines, no package
// state. New compiles lists into a *Filter, which never changes and is safe
// for concurrent use; the message path calls Check on every text message.
// Lists change by building a new Filter and swapping it in a Holder (an
// atomic pointer): a reload never blocks or disturbs a Check in progress.
//
// # Actions
//
// A Reject list's match refuses the message. A Mask list's match replaces
// each rune of the original text that the match covers with one '*': the
// union of all matches, overlapping and nested ones included, is masked,
// and every other byte of the text (emoji, combining sequences, even
// invalid UTF-8) is kept as it was, so the masked text has the original's
// rune count. A combining mark right after a masked letter is masked with
// it. Reject wins over Mask. Result names the list and entry that decided,
// for logging.
//
// # Normalization
//
// Entries and text go through the same rune-by-rune normalization, so an
// entry found in a text is found whatever the text's spelling of it:
//
//   - compatibility folding (Unicode NFKD): full-width Latin is ASCII
//     ("ｆｕｃｋ"), half-width katakana is full width, ligatures, circled,
//     mathematical and other styled letters are plain ("𝐟𝐮𝐜𝐤", "ﬁ", "①");
//     this is the width folding of golang.org/x/text/width and more;
//   - accents and other combining marks are dropped ("fück", "enculé",
//     Arabic harakat, Greek tonos), except the kana voicing marks, which
//     spell other words (ば is not は); Hangul syllables stay whole;
//   - invisible characters are dropped: zero-width space and joiners, soft
//     hyphen, bidi controls, tags, variation selectors, the Arabic tatweel;
//   - case is folded (simple folding, plus ß to ss), so final sigma is sigma;
//   - Cyrillic, Greek and Armenian letters that look like Latin ones in
//     lower case are Latin ("fuсk" with a Cyrillic с): a chosen part of
//     Unicode's confusables;
//   - katakana is hiragana (バカ is ばか);
//   - runs of blanks are one space (an entry "kill you" matches
//     "kill \n you"); entries are trimmed.
//
// Two options per list change the normalization for that list:
//
//   - Leet undoes 0→o 1→i 3→e 4→a 5→s 7→t @→a $→s, and l→i because 1
//     stands for both ("sh1t", "5h17", "@$$").
//   - IgnoreSeparators drops blanks, punctuation and symbols, emoji
//     included ("f.u.c.k", "f u c k", "f🍆u🍆c🍆k"); an apostrophe is
//     dropped as part of its word. A match that spans a dropped separator
//     must start and end on word boundaries, so it is made of whole pieces
//     ("sh it" matches "shit"; "this hit" does not).
//
// Each distinct combination of these options in a filter normalizes and
// scans the text once more.
//
// # Word boundaries
//
// Matching is by substring, in every script: Chinese and Japanese have no
// spaces to find words by, and substrings catch compounds. That brings the
// Scunthorpe problem for short Latin words ("ass" in "class"); a list with
// WholeWords accepts only matches that start and end on a word boundary.
// A boundary is a position where a letter, digit or mark does not meet
// another; it is tested on letters of scripts written with spaces only:
// Han, kana, Thai, Lao, Khmer, Myanmar, Tibetan and, because Korean
// attaches particles to words, Hangul always match as substrings.
//
// # Invalid UTF-8
//
// Check never fails or panics on bad input: each invalid byte reads as
// U+FFFD, a symbol (so a separator for IgnoreSeparators), and is copied
// unchanged into masked output. Entries must be valid UTF-8.
//
// # Bounds and cost
//
// New accepts at most MaxLists lists, MaxEntries entries of MaxEntryBytes
// each and MaxPatternBytes of distinct normalized entries. Check's memory
// is proportional to the text (the caller bounds messages at 64 KiB) and
// comes from a pool; a text with more candidate matches than 256 plus
// about one per normalized byte is refused with Overflow set instead of
// being examined for ever.
//
// Measured on the 2-core development machine while it ran other work
// (go1.26; BenchmarkCheck and BenchmarkNew hold the figures): against
// 10,000 generated entries in eight scripts, a 200-byte chat message that
// matches nothing, English or Chinese, costs 3.4–5 µs and 2 allocations
// (the matcher's iterator; the normalized text is pooled), a 40-byte one
// about 1 µs. About 80 % of it is the matcher
// (petar-dambovaliev/aho-corasick's NFA, chosen over a DFA library that
// scans five times faster and needs five times the memory; see the commit
// that added this package). Building 10,000 entries takes about 0.1 s and
// keeps 7 MB; 100,000 entries 1.0–2.7 s and 66 MB (317 MB allocated on
// the way, mostly short-lived). The worst case the
// bounds allow, 2 MiB of entries sharing no prefix, took 4.7 s and 207 MB.
//
// # Not handled
//
//   - Spellings not produced by the folds above: repeated letters
//     ("fuuuck"), symbols inside a word ("f*ck", "sh!t"), other leet
//     ("ph" for f, "|<" for k), misspellings, inflections under
//     WholeWords (list them).
//   - Letters that look Latin only in upper case (Cyrillic В Н К М Т) and
//     most of Unicode's confusables beyond the common ones.
//   - Script conversions: simplified and traditional Chinese, pinyin,
//     romaji, transliterated Cyrillic; Arabic ى/ي and ة/ه, Hebrew final
//     letters.
//   - Hangul written as separate conjoining jamo (it is not recomposed).
//   - Meaning: a listed word is matched wherever it appears, in any
//     context.
package wordfilter
