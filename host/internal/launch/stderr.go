package launch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// logLineLimit is go-plugin's default PluginLogBufferSize: it parses only
// lines that fit in it and passes longer ones through as plain text.
const logLineLimit = 64 * 1024

// sanitizeLogs returns a reader of a plugin's stderr on which go-plugin's
// log parser cannot panic. go-plugin (v1.8.0, log_entry.go parseJSON)
// type-asserts "@message", "@level" and "@timestamp" of every JSON line to
// string, so one line such as {"@message":1} from a plugin panics the
// host's log reader goroutine and ends the whole exporter. Such values are
// turned into their text; every other byte passes unchanged.
func sanitizeLogs(r io.ReadCloser, crash *crashNote) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		defer r.Close()
		if crash != nil {
			defer close(crash.done)
		}
		br := bufio.NewReaderSize(r, logLineLimit)
		continuation := false
		for {
			line, isPrefix, err := br.ReadLine()
			if err != nil {
				if errors.Is(err, os.ErrClosed) {
					err = io.EOF // cmd.Wait closed the pipe: the plugin is gone
				}
				pw.CloseWithError(err) // io.EOF reads as a clean end
				return
			}
			if !isPrefix && !continuation {
				crash.see(line)
				line = sanitizeLogLine(line)
			}
			if _, err := pw.Write(line); err != nil {
				return
			}
			if !isPrefix {
				if _, err := pw.Write([]byte{'\n'}); err != nil {
					return
				}
			}
			continuation = isPrefix
		}
	}()
	return pr
}

// sanitizeLogLine rewrites the hclog keys go-plugin asserts to be strings
// when a JSON line carries anything else there.
func sanitizeLogLine(line []byte) []byte {
	if t := bytes.TrimSpace(line); len(t) == 0 || t[0] != '{' {
		return line
	}
	var raw map[string]any
	if json.Unmarshal(line, &raw) != nil {
		return line // go-plugin logs what it cannot parse as plain text
	}
	changed := false
	for _, k := range []string{"@message", "@level", "@timestamp"} {
		if v, ok := raw[k]; ok {
			if _, isString := v.(string); !isString {
				raw[k] = fmt.Sprint(v)
				changed = true
			}
		}
	}
	if !changed {
		return line
	}
	out, err := json.Marshal(raw)
	if err != nil {
		return line
	}
	return out
}
