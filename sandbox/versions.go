package sandbox

import (
	"net/http"
	"strconv"
	"time"
)

// File versions and moves, as the file API of the second design document
// has them: uploading a new version of a file makes version n+1 and keeps
// the history (each version downloadable by ref@n); a move changes the
// folder a resource is in, never its ref, metadata or identity.

// KindFileVersion is the effect of uploading a new version of a file.
const KindFileVersion = "file_version"

// fileVersion is one version of a file.
type fileVersion struct {
	N              int       `json:"n"`
	Ref            string    `json:"ref"` // ref@n
	OperationID    string    `json:"operation_id"`
	LogicalVersion string    `json:"logical_version"`
	Size           int       `json:"size"`
	CreatedAt      time.Time `json:"created_at"`
	// effect indexes Sandbox.effects: the upload that made this version.
	effect int
}

// versionsOf starts r's history at its first version. The caller holds s.mu.
func (r *resource) versionsOf() []fileVersion {
	if r.kind == KindFile && len(r.versions) == 0 {
		size, _ := r.attrs["size"].(int)
		r.versions = []fileVersion{{N: 1, Ref: r.ref + "@1", OperationID: r.operationID, LogicalVersion: r.logicalVersion,
			Size: size, CreatedAt: r.createdAt, effect: r.effect}}
	}
	return r.versions
}

// uploadVersion is POST /files/{ref}/versions: the file's next version,
// named by the request's metadata (its operation and logical version). The
// file's current logical version becomes the new one; its ref does not
// change, and the upload is an effect of its own.
func (s *Sandbox) uploadVersion(r *http.Request, body []byte) answer {
	var req struct {
		Content  string         `json:"content"`
		Metadata map[string]any `json:"metadata"`
	}
	if err := decode(body, &req, &req.Metadata); err != nil {
		return invalid(err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res, ok := s.resources[r.PathValue("ref")]
	if !ok || res.kind != KindFile || res.compensated {
		return answerJSON(http.StatusNotFound, apiError{Error: "not_found"}, false)
	}
	vs := res.versionsOf()
	now := s.now()
	v := fileVersion{N: len(vs) + 1, OperationID: stringField(req.Metadata, "operation_id"),
		LogicalVersion: stringField(req.Metadata, "logical_version"), Size: len(req.Content), CreatedAt: now, effect: len(s.effects)}
	v.Ref = res.ref + "@" + strconv.Itoa(v.N)
	res.versions = append(vs, v)
	res.logicalVersion = v.LogicalVersion
	res.attrs["size"] = v.Size
	res.attrs["current_version"] = v.N
	s.effects = append(s.effects, Effect{OperationID: v.OperationID, LogicalVersion: v.LogicalVersion,
		ResourceRef: v.Ref, Kind: KindFileVersion, At: now})
	view := res.view()
	view["version_ref"] = v.Ref
	return answerJSON(http.StatusCreated, view, true)
}

// moveResource is POST /resources/{ref}/move {"folder_ref": …}: the
// resource's folder changes; its ref, metadata and identity do not. A move
// is not an effect (nothing new exists), and moving it where it is
// already is answered the same.
func (s *Sandbox) moveResource(r *http.Request, body []byte) answer {
	var req struct {
		FolderRef string         `json:"folder_ref"`
		Metadata  map[string]any `json:"metadata"`
	}
	if err := decode(body, &req, &req.Metadata); err != nil {
		return invalid(err.Error())
	}
	if req.FolderRef == "" {
		return invalid("folder_ref: required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res, ok := s.resources[r.PathValue("ref")]
	if !ok || res.compensated {
		return answerJSON(http.StatusNotFound, apiError{Error: "not_found"}, false)
	}
	if f, ok := s.resources[req.FolderRef]; !ok || f.kind != KindFolder || f.compensated {
		return invalid("folder_ref: no such folder")
	}
	res.attrs["folder_ref"] = req.FolderRef
	return answerJSON(http.StatusOK, res.view(), true)
}

// getHistory is GET /resources/{ref}/history: a file's versions, oldest
// first (one version for anything else).
func (s *Sandbox) getHistory(r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, ok := s.resources[r.PathValue("ref")]
	if !ok {
		return http.StatusNotFound, apiError{Error: "not_found"}
	}
	vs := res.versionsOf()
	if len(vs) == 0 {
		vs = []fileVersion{{N: 1, Ref: res.ref + "@1", OperationID: res.operationID, LogicalVersion: res.logicalVersion, CreatedAt: res.createdAt}}
	}
	out := make([]fileVersion, len(vs))
	copy(out, vs)
	for i := range out {
		out[i].CreatedAt = out[i].CreatedAt.UTC()
	}
	return http.StatusOK, map[string]any{"ref": res.ref, "versions": out}
}
