package sdk

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Duration is a time span in a plugin's config: a Go duration string
// ("30s", "5m", "1h30m", "250ms") or a number of seconds (90, 0.5).
//
//	type config struct {
//		Interval sdk.Duration `json:"interval"`
//	}
//
// A value that is neither fails Config.Decode with an error that starts
// with its key and quotes the value (`interval: "soon" is not a duration
// ...`), so the operator sees which setting to fix. Range checks (a
// minimum, no negative span) are the plugin's, in its validate.
type Duration struct {
	time.Duration
	// err is why the value did not parse: kept for Decode, which knows the
	// key (an error returned from UnmarshalJSON cannot name it).
	err error
}

// UnmarshalJSON reads a duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	d.Duration, d.err = 0, nil
	switch x := v.(type) {
	case string:
		var err error
		if d.Duration, err = time.ParseDuration(x); err != nil {
			d.err = fmt.Errorf("%q is not a duration like \"30s\" or \"5m\" (%w)", x, err)
		}
	case float64:
		d.Duration = time.Duration(x * float64(time.Second))
	default:
		d.err = fmt.Errorf("%s is neither a duration string like \"5m\" nor a number of seconds", b)
	}
	return nil
}

// MarshalJSON writes the duration string ("5m0s").
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

var durationType = reflect.TypeFor[Duration]()

// durationError returns the first Duration in v (a decoded config) that
// did not parse, as an error starting with its key: "interval: ...",
// "probes[2].timeout: ...".
func durationError(v reflect.Value, key string) error {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return durationError(v.Elem(), key)
	case reflect.Struct:
		if v.Type() == durationType {
			if d, ok := v.Interface().(Duration); ok && d.err != nil {
				return fmt.Errorf("%s: %w", key, d.err)
			}
			return nil
		}
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, ok := jsonKey(f)
			if !ok || !v.Field(i).CanInterface() {
				continue // encoding/json does not fill it either
			}
			if f.Anonymous && f.Tag.Get("json") == "" {
				name = key // embedded: its keys are the parent's
			} else if key != "" {
				name = key + "." + name
			}
			if err := durationError(v.Field(i), name); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if err := durationError(v.Index(i), key+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			if err := durationError(iter.Value(), fmt.Sprintf("%s[%v]", key, iter.Key())); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonKey returns the key encoding/json uses for a struct field, and
// false for a field it ignores.
func jsonKey(f reflect.StructField) (string, bool) {
	if !f.IsExported() && !f.Anonymous {
		return "", false
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false
	}
	if name, _, _ := strings.Cut(tag, ","); name != "" {
		return name, true
	}
	return f.Name, true
}
