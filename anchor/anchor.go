// Package anchor keeps signed audit checkpoints outside the database: one
// small file per checkpoint in a directory, written once and never
// replaced, the way CloudTrail delivers its digest files to a bucket the
// log's writer cannot rewrite. `limbo audit verify --anchor DIR` reads them
// back, so deleting or rewriting events or checkpoints in the database up
// to the newest file is named by seq.
package anchor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync/atomic"

	"github.com/limbo-dev/limbo/store"
)

// FileName is the file holding checkpoint id: its id, zero-padded so the
// names sort in checkpoint order.
func FileName(id int64) string { return fmt.Sprintf("%020d.json", id) }

var namePattern = regexp.MustCompile(`^([0-9]{20})\.json$`)

// ErrDiffers: the directory already holds a different file for this
// checkpoint. It is never replaced; the database's copy is the suspect.
var ErrDiffers = errors.New("a different copy of this checkpoint is already anchored")

// Write puts c in dir unless a file for it is there already. The file is
// written under a temporary name, fsynced, linked to its final name (a link
// never replaces an existing file, unlike a rename) and the directory
// fsynced, so an anchor that Write returned for survives a crash.
func Write(dir string, c *store.Checkpoint) error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	final := filepath.Join(dir, FileName(c.ID))
	if err := same(final, c); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), final); errors.Is(err, fs.ErrExist) {
		return same(final, c) // another instance wrote it meanwhile
	} else if err != nil {
		return err
	}
	return syncDir(dir)
}

// same reports whether the anchor file at path holds c (fs.ErrNotExist
// when there is no such file, ErrDiffers when it holds another checkpoint).
func same(path string, c *store.Checkpoint) error {
	got, err := readFile(path)
	if err != nil {
		return err
	}
	if got.ID != c.ID || got.Hash != c.Hash || got.Signature != c.Signature {
		return fmt.Errorf("%s: %w", path, ErrDiffers)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func readFile(path string) (*store.Checkpoint, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c := &store.Checkpoint{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		return nil, fmt.Errorf("anchor: %s: %w", path, err)
	}
	return c, nil
}

// Read returns every checkpoint anchored in dir, in id order. A file whose
// name and content disagree on the id is an error: it was moved.
func Read(dir string) ([]store.Checkpoint, error) {
	ids, err := list(dir)
	if err != nil {
		return nil, err
	}
	out := make([]store.Checkpoint, 0, len(ids))
	for _, id := range ids {
		c, err := readFile(filepath.Join(dir, FileName(id)))
		if err != nil {
			return nil, err
		}
		if c.ID != id {
			return nil, fmt.Errorf("anchor: %s holds checkpoint %d", FileName(id), c.ID)
		}
		out = append(out, *c)
	}
	return out, nil
}

// list returns the checkpoint ids anchored in dir, in order.
func list(dir string) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("anchor: %w", err)
	}
	var ids []int64
	for _, e := range entries { // ReadDir sorts by name: by id
		m := namePattern.FindStringSubmatch(e.Name())
		if m == nil || !e.Type().IsRegular() {
			continue
		}
		id, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("anchor: %s: %w", e.Name(), err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// Writer copies every checkpoint the database holds into a directory,
// whichever instance sealed it, so with several instances on one
// PostgreSQL each one's directory gets the whole chain.
type Writer struct {
	dir string
	st  *store.Store
	log *slog.Logger

	// last is the newest checkpoint in dir, lastHash its hash; alarmed
	// remembers the alarms raised, so each is logged once.
	last     int64
	lastHash string
	alarmed  map[string]bool
	// alarms counts the alarms raised (each once), for /metrics.
	alarms atomic.Int64
	// ours: a checkpoint signed by the store's key is at or before last.
	// Until then, checkpoints intact but naming another key are the ones
	// the trail was handed over from, and are anchored like any other;
	// after it, one is an alarm.
	ours bool
}

// catchUpBatch bounds how many checkpoints one query reads.
const catchUpBatch = 500

// NewWriter opens dir (created 0700 if missing) for st's checkpoints.
func NewWriter(dir string, st *store.Store, log *slog.Logger) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("anchor: %w", err)
	}
	w := &Writer{dir: dir, st: st, log: log, alarmed: map[string]bool{}}
	ids, err := list(dir)
	if err != nil {
		return nil, err
	}
	if n := len(ids); n > 0 {
		c, err := readFile(filepath.Join(dir, FileName(ids[n-1])))
		if err != nil {
			return nil, err
		}
		w.last, w.lastHash = c.ID, c.Hash
		w.ours = c.Check(st.AuditPublicKey()) == nil
	}
	return w, nil
}

// Alarms counts the alarms this writer raised (each logged once): the
// database disagreeing with the directory. Safe for concurrent use.
func (w *Writer) Alarms() int64 { return w.alarms.Load() }

// Dir is the directory written to.
func (w *Writer) Dir() string { return w.dir }

// alarm logs, once, that the database no longer agrees with the directory.
// Writing goes on: the anchors already there are the proof.
func (w *Writer) alarm(id int64, problem string) {
	key := strconv.FormatInt(id, 10) + ":" + problem
	if w.alarmed[key] {
		return
	}
	w.alarmed[key] = true
	w.alarms.Add(1)
	w.log.Error("audit anchor alarm: the database disagrees with the anchor directory",
		"checkpoint", id, "dir", w.dir, "problem", problem)
}

// CatchUp writes every checkpoint newer than the directory's newest, and
// checks that the database still holds that newest one unchanged. Not safe
// for concurrent use (the sealer loop calls it).
func (w *Writer) CatchUp(ctx context.Context) error {
	pub := w.st.AuditPublicKey()
	for {
		cps, err := w.st.CheckpointsAfter(ctx, max(w.last-1, 0), catchUpBatch)
		if err != nil {
			return err
		}
		if w.last > 0 && (len(cps) == 0 || cps[0].ID != w.last) {
			w.alarm(w.last, "the newest anchored checkpoint is missing from the database")
		}
		for i := range cps {
			c := &cps[i]
			if c.ID <= w.last {
				if c.ID == w.last && c.Hash != w.lastHash {
					w.alarm(c.ID, "the database's copy differs from the anchored one")
				}
				continue
			}
			err := c.Check(pub)
			if err == nil {
				w.ours = true
			} else if !w.ours && c.NamesOtherKey(pub) {
				// Signed before the trail was handed over to this key: its
				// first checkpoint will vouch for this one by hash, as
				// verify checks (its anchored copy is read the same way).
				err = nil
			}
			if err != nil {
				w.alarm(c.ID, "not anchored: "+err.Error())
			} else if err := Write(w.dir, c); errors.Is(err, ErrDiffers) {
				w.alarm(c.ID, err.Error())
			} else if err != nil {
				return fmt.Errorf("anchor: %w", err)
			}
			w.last, w.lastHash = c.ID, c.Hash
		}
		if len(cps) < catchUpBatch {
			return nil
		}
	}
}

// ReadExported reads a checkpoint `limbo audit export` wrote, to verify
// the trail against.
func ReadExported(path string) (store.Checkpoint, error) {
	c, err := readFile(path)
	if err != nil {
		return store.Checkpoint{}, err
	}
	return *c, nil
}
