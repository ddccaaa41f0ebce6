/* The words a search hit's snippet marks, found again in its message's text (history.js marks them). */

const escapeRe = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

// Scripts written without spaces between words, and Korean (optimizer.lexical's unspaced runs): the
// server marks a word inside its run ("東京" in "来月東京に"), where no gap stands around it. Less the
// Latin marks and the modifier apostrophe that some of them share, as there.
const UNSPACED = new RegExp(["Han", "Hiragana", "Katakana", "Hangul", "Thai", "Lao", "Khmer", "Myanmar"]
  .map((script) => `\\p{scx=${script}}`).join("|"), "u");
const SHARED = /[\u0300-\u036f\u02bc]/gu;
const isUnspaced = (word) => UNSPACED.test(word.replace(SHARED, ""));

/** A pattern whose one group is any of `words` standing as a word of its own (not inside a longer
 *  one; inside its run for a word of an unspaced script): `text.split(pattern)` puts the words found
 *  at the odd places. The longer of two words that open alike is tried first. */
export function searchWordsPattern(words) {
  const sorted = [...words].sort((a, b) => b.length - a.length);
  const spaced = sorted.filter((w) => !isUnspaced(w)).map(escapeRe);
  const unspaced = sorted.filter(isUnspaced).map(escapeRe);
  const alone = spaced.length ? [`(?<![\\p{L}\\p{N}])(?:${spaced.join("|")})(?![\\p{L}\\p{N}])`] : [];
  return new RegExp(`(${[...alone, ...unspaced].join("|")})`, "giu");
}
