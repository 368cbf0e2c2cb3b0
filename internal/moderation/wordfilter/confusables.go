package wordfilter

// confusable maps a lower-case Cyrillic, Greek, Armenian or Latin-extension
// letter that looks like a Latin letter to that letter (0 for others), so
// "fuсk" with a Cyrillic с is "fuck". Mapping is applied to lists and text
// alike, and each script maps injectively, so Russian lists still match
// Russian text. Only letters that look Latin in lower case are mapped:
// в, н, т, к, м look Latin only in upper case, and mapping them would make
// ordinary Russian words collide with English ones. This is a chosen subset
// of Unicode's confusables (UTS #39), not all of it.
func confusable(r rune) byte {
	switch r {
	// Cyrillic
	case 'а':
		return 'a'
	case 'е':
		return 'e'
	case 'о':
		return 'o'
	case 'р':
		return 'p'
	case 'с':
		return 'c'
	case 'х':
		return 'x'
	case 'у', 'ү':
		return 'y'
	case 'і':
		return 'i'
	case 'ј':
		return 'j'
	case 'ѕ':
		return 's'
	case 'һ':
		return 'h'
	case 'ԁ':
		return 'd'
	case 'ԛ':
		return 'q'
	case 'ԝ':
		return 'w'
	case 'ӏ':
		return 'l'
	case 'ѵ':
		return 'v'
	// Greek
	case 'α':
		return 'a'
	case 'β':
		return 'b'
	case 'γ':
		return 'y'
	case 'ε':
		return 'e'
	case 'η':
		return 'n'
	case 'ι':
		return 'i'
	case 'κ':
		return 'k'
	case 'ν':
		return 'v'
	case 'ο':
		return 'o'
	case 'ρ':
		return 'p'
	case 'τ':
		return 't'
	case 'υ':
		return 'u'
	case 'χ':
		return 'x'
	case 'ϲ':
		return 'c'
	case 'ϳ':
		return 'j'
	// Armenian
	case 'օ':
		return 'o'
	case 'ս':
		return 'u'
	case 'հ':
		return 'h'
	case 'ո':
		return 'n'
	// Latin letters outside ASCII that NFKD leaves alone
	case 'ɑ':
		return 'a'
	case 'ɡ':
		return 'g'
	case 'ɩ':
		return 'i'
	case 'ʋ':
		return 'v'
	case 'ı':
		return 'i'
	}
	return 0
}
