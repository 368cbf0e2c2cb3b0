package bench

import (
	"math/rand/v2"
	"strings"
	"unicode/utf8"
)

// searchLang is one language of the search scenario's messages: common
// words a sentence is drawn from, and rare words, each put into about one
// message in rareEvery (of all languages together, spread over the rare
// words of all languages), so that a rare word's hits per user are few and
// known from the generator.
type searchLang struct {
	name string
	// joined: written without spaces between words (one run of
	// characters); the others put a space between words.
	joined  bool
	title   bool // capitalize the first word
	end     string
	common  []string
	rare    []rareWord
	phrases bool // phrase queries draw word pairs from this language
}

// rareWord is a word as written in messages and as a user types it to
// find it (without accents, ß as ss: the server folds both alike).
type rareWord struct {
	word, query string
}

// rareEvery: about one message in rareEvery holds one rare word.
const rareEvery = 100

// The words: no stop words (an index may drop them), and no rare word's
// folded form among the common words; in the scripts written without
// spaces (and Korean, indexed as pairs of characters too) no character of
// a rare word is in any common word, so a rare word's characters stand
// side by side only where the rare word is.
var searchLangs = []searchLang{
	{name: "en", title: true, end: ".", phrases: true,
		common: []string{"meeting", "tomorrow", "coffee", "harbour", "morning", "train", "station", "library", "garden", "dinner",
			"friday", "weekend", "project", "window", "river", "market", "evening", "office", "ticket", "music",
			"summer", "winter", "bridge", "photo", "concert", "holiday", "bakery", "street", "birthday", "weather"},
		rare: []rareWord{{"zephyr", "zephyr"}, {"quasar", "quasar"}, {"marzipan", "marzipan"}}},
	{name: "de", end: ".", phrases: true,
		common: []string{"Straße", "Brücke", "Bahnhof", "Frühstück", "Mädchen", "Käse", "Größe", "morgen", "Fußball", "schön",
			"Grüße", "Bücher", "Wasser", "Kaffee", "Treffen", "Abend", "Wetter", "Urlaub", "Geschäft", "Küche",
			"Zug", "Fahrkarte", "Bäckerei", "Geburtstag", "Sommer", "Garten", "spät", "Übung", "Tür", "heißen"},
		rare: []rareWord{{"Fußgängerüberweg", "fussgangeruberweg"}, {"Eichhörnchen", "eichhornchen"}, {"Schnürsenkel", "schnursenkel"}}},
	{name: "fr", title: true, end: ".", phrases: true,
		common: []string{"café", "hôtel", "élève", "forêt", "château", "très", "déjà", "fenêtre", "garçon", "l'école",
			"bibliothèque", "été", "hiver", "marché", "gâteau", "théâtre", "musée", "rivière", "crème", "noël",
			"demain", "soirée", "réunion", "gare", "billet", "fête", "pâtisserie", "rendez-vous", "où", "français"},
		rare: []rareWord{{"éphémère", "ephemere"}, {"hétéroclite", "heteroclite"}, {"pêcheur", "pecheur"}}},
	{name: "ru", title: true, end: ".", phrases: true,
		common: []string{"встреча", "завтра", "кофе", "библиотека", "вокзал", "утро", "вечер", "река", "мост", "рынок",
			"работа", "музыка", "зима", "лето", "окно", "поезд", "город", "улица", "друзья", "письмо",
			"ёлка", "билет", "праздник", "погода", "сад", "ужин", "суббота", "концерт", "фотография", "площадь"},
		rare: []rareWord{{"достопримечательность", "достопримечательность"}, {"ёжик", "ежик"}, {"самовар", "самовар"}}},
	{name: "el", title: true, end: ".", phrases: true,
		common: []string{"λιμάνι", "καφές", "θάλασσα", "πρωί", "βράδυ", "σπίτι", "δρόμος", "βιβλίο", "φίλος", "ήλιος",
			"νερό", "ψωμί", "μουσική", "καλοκαίρι", "χειμώνας", "αγορά", "γέφυρα", "τρένο", "σταθμός", "παράθυρο",
			"αύριο", "συνάντηση", "εισιτήριο", "γιορτή", "κήπος", "δείπνο", "Σάββατο", "συναυλία", "φωτογραφία", "πλατεία"},
		rare: []rareWord{{"φιλοξενία", "φιλοξενια"}, {"μελαγχολία", "μελαγχολια"}, {"ουρανοξύστης", "ουρανοξυστης"}}},
	{name: "zh", joined: true, end: "。",
		common: []string{"图书馆", "明天", "我们", "门口", "见面", "咖啡", "火车站", "早上", "晚上", "朋友",
			"电影院", "天气", "公园", "办公室", "音乐会", "周末", "下午", "学校", "医院", "超市",
			"生日", "照片", "旅行", "工作", "吃饭", "一起", "地铁", "商店", "城市", "河边"},
		rare: []rareWord{{"麒麟", "麒麟"}, {"琵琶", "琵琶"}, {"饕餮", "饕餮"}}},
	{name: "ja", joined: true, end: "。",
		common: []string{"図書館", "明日", "駅前", "コーヒー", "待ち合わせ", "友達", "映画館", "天気予報", "公園", "会議室",
			"週末", "電車", "東京", "大阪", "晩ご飯", "お昼", "仕事", "音楽", "写真", "旅行",
			"誕生日", "花火", "温泉", "お祭り", "買い物", "新幹線", "喫茶店", "桜", "海辺", "約束"},
		rare: []rareWord{{"蒟蒻", "蒟蒻"}, {"薔薇", "薔薇"}, {"檸檬", "檸檬"}}},
	{name: "ko", end: ".",
		common: []string{"내일", "도서관", "커피", "만나요", "아침", "저녁", "친구", "영화관", "날씨", "공원",
			"회의", "주말", "기차역", "점심", "학교", "병원", "시장", "음악", "사진", "여행",
			"생일", "축제", "바다", "산책", "약속", "가게", "도시", "지하철", "오늘", "함께"},
		rare: []rareWord{{"꽃샘추위", "꽃샘추위"}, {"펭귄", "펭귄"}, {"반딧불", "반딧불"}}},
	{name: "th", joined: true,
		common: []string{"ห้องสมุด", "พรุ่งนี้", "กาแฟ", "เพื่อน", "ตอนเช้า", "ตอนเย็น", "รถไฟ", "สถานี", "ตลาด", "โรงเรียน",
			"โรงพยาบาล", "ดนตรี", "อากาศ", "สวน", "ทำงาน", "เดินทาง", "ถ่ายรูป", "อาหาร", "แม่น้ำ", "สะพาน"}},
}

// rareRef names one rare word: its language and its index there.
type rareRef struct{ lang, i int }

// searchRares lists every rare word, in a fixed order: a sender's counts
// of rare words are indexed by it.
var searchRares = func() []rareRef {
	var out []rareRef
	for l, lg := range searchLangs {
		for i := range lg.rare {
			out = append(out, rareRef{l, i})
		}
	}
	return out
}()

func (r rareRef) word() rareWord { return searchLangs[r.lang].rare[r.i] }

// searchText is message m of a sender: one language drawn at random, 5–12
// common words and, in about one message in rareEvery, one rare word.
// rare is its index in searchRares, or -1. The same seed, sender and m give
// the same text.
func searchText(seed uint64, sender int, m uint64, sb *strings.Builder) (text string, rare int) {
	r := rand.New(rand.NewPCG(seed^uint64(sender)<<40, m))
	lang := r.IntN(len(searchLangs))
	lg := &searchLangs[lang]
	n := 5 + r.IntN(8)
	rare, at := -1, -1
	if len(lg.rare) > 0 && r.IntN(rareEvery) == 0 {
		i := r.IntN(len(lg.rare))
		for k, ref := range searchRares {
			if ref == (rareRef{lang, i}) {
				rare = k
			}
		}
		at = r.IntN(n)
	}
	sb.Reset()
	for k := range n {
		if k > 0 && !lg.joined {
			sb.WriteByte(' ')
		}
		w := lg.common[r.IntN(len(lg.common))]
		if k == at {
			w = lg.rare[searchRares[rare].i].word
		}
		if k == 0 && lg.title {
			c, size := utf8.DecodeRuneInString(w)
			sb.WriteString(strings.ToUpper(string(c)))
			w = w[size:]
		}
		sb.WriteString(w)
	}
	sb.WriteString(lg.end)
	return sb.String(), rare
}

// searchQuery is one query of a kind, drawn at random:
//
//	word    one common word of a language written with spaces
//	rare    one rare word (as a user types it: no accents)
//	phrase  two common words of one language, in this order, side by side
//	cjk     two characters from inside a longer Chinese or Japanese word
func searchQuery(kind string, r *rand.Rand) (q string, phrase bool) {
	switch kind {
	case "rare":
		return searchRares[r.IntN(len(searchRares))].word().query, false
	case "phrase":
		var ls []*searchLang
		for i := range searchLangs {
			if searchLangs[i].phrases {
				ls = append(ls, &searchLangs[i])
			}
		}
		lg := ls[r.IntN(len(ls))]
		return lg.common[r.IntN(len(lg.common))] + " " + lg.common[r.IntN(len(lg.common))], true
	case "cjk":
		var words []string
		for _, lg := range searchLangs {
			if lg.name == "zh" || lg.name == "ja" {
				for _, w := range lg.common {
					if utf8.RuneCountInString(w) >= 3 {
						words = append(words, w)
					}
				}
			}
		}
		rs := []rune(words[r.IntN(len(words))])
		i := r.IntN(len(rs) - 1)
		return string(rs[i : i+2]), false
	}
	var ls []*searchLang
	for i := range searchLangs {
		if !searchLangs[i].joined {
			ls = append(ls, &searchLangs[i])
		}
	}
	lg := ls[r.IntN(len(ls))]
	return strings.ToLower(lg.common[r.IntN(len(lg.common))]), false
}

// searchKinds are the query kinds, in the order searchers take them.
var searchKinds = []string{"word", "rare", "phrase", "cjk"}
