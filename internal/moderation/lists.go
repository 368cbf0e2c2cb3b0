package moderation

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"time"

	"github.com/parleyim/parley/internal/moderation/wordfilter"
	"github.com/parleyim/parley/internal/store"
)

// The settings keys of the admin API's filter lists: the lists, and a
// version written after them that nodes poll (a few bytes a poll, where
// the lists may be megabytes).
const (
	listsKey   = "moderation/word_lists"
	versionKey = "moderation/word_lists_version"
)

// FilterList is a word filter list as the admin API takes and shows it.
type FilterList struct {
	Name string `json:"name"`
	// Action is "mask" (replace each matched character with "*") or
	// "reject" (refuse the message).
	Action           string   `json:"action"`
	Words            []string `json:"words"`
	Leet             bool     `json:"leet,omitempty"`
	IgnoreSeparators bool     `json:"ignore_separators,omitempty"`
	WholeWords       bool     `json:"whole_words,omitempty"`
}

// ParseAction reads a list's action.
func ParseAction(a string) (wordfilter.Action, bool) {
	switch a {
	case "mask":
		return wordfilter.Mask, true
	case "reject":
		return wordfilter.Reject, true
	}
	return wordfilter.None, false
}

func (l FilterList) list() (wordfilter.List, error) {
	a, ok := ParseAction(l.Action)
	if !ok {
		return wordfilter.List{}, fmt.Errorf("list %q: action must be \"mask\" or \"reject\"", l.Name)
	}
	return wordfilter.List{Name: l.Name, Action: a, Words: l.Words, Leet: l.Leet,
		IgnoreSeparators: l.IgnoreSeparators, WholeWords: l.WholeWords}, nil
}

// ErrInvalidList is PutFilterList's refusal of a list: its text says why.
type ErrInvalidList struct{ Reason string }

func (e *ErrInvalidList) Error() string { return e.Reason }

// Lists are the filter's lists: the configuration's (read-only here) and
// the admin API's.
type Lists struct {
	Config []ConfigListInfo `json:"config"`
	Admin  []FilterList     `json:"lists"`
	// ContentTypes are the content types the filter reads.
	ContentTypes []string `json:"content_types"`
}

// ConfigListInfo describes a configuration list without its words.
type ConfigListInfo struct {
	Name      string `json:"name"`
	Action    string `json:"action"`
	Words     int    `json:"words"`
	WordsFile string `json:"words_file,omitempty"`
}

// FilterLists returns the lists in use on this node.
func (s *Service) FilterLists(ctx context.Context) (Lists, error) {
	admin, err := s.readAdminLists(ctx)
	if err != nil {
		return Lists{}, err
	}
	out := Lists{Admin: admin, ContentTypes: s.textTypes()}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cl := range s.cfg.FilterLists {
		out.Config = append(out.Config, ConfigListInfo{Name: cl.Name, Action: cl.Action.String(), Words: len(cl.Words), WordsFile: cl.WordsFile})
	}
	return out, nil
}

// PutFilterList adds or replaces the admin API's list named l.Name. The
// filter it makes with every other list must build (wordfilter's bounds),
// else *ErrInvalidList. Every node uses it within ReloadInterval.
func (s *Service) PutFilterList(ctx context.Context, l FilterList) error {
	return s.changeLists(ctx, func(lists []FilterList) ([]FilterList, error) {
		if _, err := l.list(); err != nil {
			return nil, &ErrInvalidList{err.Error()}
		}
		for i := range lists {
			if lists[i].Name == l.Name {
				lists[i] = l
				return lists, nil
			}
		}
		return append(lists, l), nil
	})
}

// DeleteFilterList removes the admin API's list named name; store.ErrNotFound
// when there is none.
func (s *Service) DeleteFilterList(ctx context.Context, name string) error {
	return s.changeLists(ctx, func(lists []FilterList) ([]FilterList, error) {
		for i := range lists {
			if lists[i].Name == name {
				return append(lists[:i], lists[i+1:]...), nil
			}
		}
		return nil, store.ErrNotFound
	})
}

// changeLists applies change to the stored lists, checks that the filter
// builds, stores them with a compare-and-swap (a change made meanwhile
// through another node is read again and change applied on top of it, so
// neither is lost), then a new version, and uses them at once here.
func (s *Service) changeLists(ctx context.Context, change func([]FilterList) ([]FilterList, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for attempt := range maxListSwaps {
		if attempt > 0 { // another node is changing them too: let it finish
			select {
			case <-time.After(time.Duration(attempt) * time.Duration(1+mrand.IntN(5)) * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		old, err := s.store.GetSetting(ctx, listsKey)
		if errors.Is(err, store.ErrNotFound) {
			old, err = nil, nil
		}
		if err != nil {
			return err
		}
		var lists []FilterList
		if old != nil {
			if err := json.Unmarshal(old, &lists); err != nil {
				return fmt.Errorf("moderation: stored word lists: %w", err)
			}
		}
		if lists, err = change(lists); err != nil {
			return err
		}
		f, err := s.build(s.configLists(), lists)
		if err != nil {
			return &ErrInvalidList{err.Error()}
		}
		b, err := json.Marshal(lists)
		if err != nil {
			return err
		}
		swapped, err := s.store.SwapSetting(ctx, listsKey, old, b)
		if err != nil {
			return err
		}
		if !swapped {
			continue // another node changed the lists since we read them
		}
		if err := s.store.PutSetting(ctx, versionKey, []byte(rand.Text())); err != nil {
			return err
		}
		s.stored = b
		s.filter.Store(f)
		return nil
	}
	return ErrBusy
}

// maxListSwaps bounds changeLists' attempts while other nodes keep
// changing the lists.
const maxListSwaps = 20

// ErrBusy: the lists kept changing through other nodes; try again.
var ErrBusy = errors.New("moderation: the word lists are being changed elsewhere; try again")

func (s *Service) readAdminLists(ctx context.Context) ([]FilterList, error) {
	b, err := s.store.GetSetting(ctx, listsKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var lists []FilterList
	if err := json.Unmarshal(b, &lists); err != nil {
		return nil, fmt.Errorf("moderation: stored word lists: %w", err)
	}
	return lists, nil
}

// configLists returns the configuration's lists with the words last read
// from their files. Called with s.mu held.
func (s *Service) configLists() []wordfilter.List {
	out := make([]wordfilter.List, 0, len(s.cfg.FilterLists))
	for _, cl := range s.cfg.FilterLists {
		out = append(out, cl.List)
	}
	return out
}

// build makes the filter of the configuration's lists and the admin API's.
func (s *Service) build(config []wordfilter.List, admin []FilterList) (*wordfilter.Filter, error) {
	all := append([]wordfilter.List(nil), config...)
	for _, l := range admin {
		wl, err := l.list()
		if err != nil {
			return nil, err
		}
		all = append(all, wl)
	}
	return wordfilter.New(all)
}

// reload reads changed word files and, when the version in the store moved,
// the admin API's lists, and swaps in the filter they make. With first,
// every failure is an error (the server does not start); later a failure
// keeps the filter in use, is logged and counted.
func (s *Service) reload(ctx context.Context, first bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := first
	for i := range s.cfg.FilterLists {
		cl := &s.cfg.FilterLists[i]
		if cl.WordsFile == "" {
			continue
		}
		fi, err := os.Stat(cl.WordsFile)
		if err != nil {
			if first {
				return fmt.Errorf("moderation: word list %q: %w", cl.Name, err)
			}
			continue // keeps its words; logged when it comes back changed
		}
		if fi.ModTime().Equal(s.fileTimes[i]) {
			continue
		}
		b, err := os.ReadFile(cl.WordsFile)
		if err != nil {
			if first {
				return fmt.Errorf("moderation: word list %q: %w", cl.Name, err)
			}
			continue
		}
		cl.Words, s.fileTimes[i], changed = trimLines(b), fi.ModTime(), true
	}
	var stored []byte
	if v, err := s.store.GetSetting(ctx, versionKey); err == nil {
		if !bytes.Equal(v, s.version) || first {
			if stored, err = s.store.GetSetting(ctx, listsKey); err != nil && !errors.Is(err, store.ErrNotFound) {
				return s.reloadFailed(first, err)
			}
			s.version = v
			changed = changed || !bytes.Equal(stored, s.stored)
		} else {
			stored = s.stored
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return s.reloadFailed(first, err)
	}
	if !changed {
		return nil
	}
	var admin []FilterList
	if len(stored) > 0 {
		if err := json.Unmarshal(stored, &admin); err != nil {
			return s.reloadFailed(first, fmt.Errorf("stored word lists: %w", err))
		}
	}
	f, err := s.build(s.configLists(), admin)
	if err != nil {
		return s.reloadFailed(first, err)
	}
	s.stored = stored
	s.filter.Store(f)
	if !first {
		s.log.Info("word filter reloaded", "entries", f.Len())
	}
	return nil
}

// SetFilterLists replaces the configuration's lists (a configuration
// reload), reading their word files; on an error the lists in use stay.
func (s *Service) SetFilterLists(lists []ConfigList) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	lists = append([]ConfigList(nil), lists...)
	times := make([]time.Time, len(lists))
	for i := range lists {
		cl := &lists[i]
		if cl.WordsFile == "" {
			continue
		}
		fi, err := os.Stat(cl.WordsFile)
		if err != nil {
			return fmt.Errorf("moderation: word list %q: %w", cl.Name, err)
		}
		b, err := os.ReadFile(cl.WordsFile)
		if err != nil {
			return fmt.Errorf("moderation: word list %q: %w", cl.Name, err)
		}
		cl.Words, times[i] = trimLines(b), fi.ModTime()
	}
	var admin []FilterList
	if len(s.stored) > 0 {
		if err := json.Unmarshal(s.stored, &admin); err != nil {
			return fmt.Errorf("moderation: stored word lists: %w", err)
		}
	}
	config := make([]wordfilter.List, 0, len(lists))
	for _, cl := range lists {
		config = append(config, cl.List)
	}
	f, err := s.build(config, admin)
	if err != nil {
		return fmt.Errorf("moderation: %w", err)
	}
	s.cfg.FilterLists, s.fileTimes = lists, times
	s.filter.Store(f)
	return nil
}

func (s *Service) reloadFailed(first bool, err error) error {
	if first {
		return fmt.Errorf("moderation: %w", err)
	}
	s.reloadFailures.Add(1)
	s.log.Warn("word filter reload failed; the lists in use stay", "err", err)
	return nil
}

func (s *Service) reloadLoop() {
	defer close(s.done)
	t := time.NewTicker(s.cfg.ReloadInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.reload(ctx, false)
		cancel()
	}
}
