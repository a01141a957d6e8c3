package notify

import "strings"

// Slug is key as a Healthchecks check slug, for the {key} of a ping URL: Healthchecks
// slugs are lower-case a-z, 0-9, "-" and "_", and a slug URL with any other byte answers
// 404 (or creates a check that no one pings again). Upper case becomes lower case, and
// each run of other bytes (and of hyphens) becomes one "-": "gc.sh-9cda6ff8" is
// "gc-sh-9cda6ff8", "team/db@night" is "team-db-night". Only the URL changes: the lock
// keeps its key. Two keys may share a slug ("a.b", "a-b"); give such jobs keys that differ
// in letters or digits, or a --ping of their own.
func Slug(key string) string {
	var b strings.Builder
	b.Grow(len(key))
	dash := false
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '_':
		default:
			if !dash {
				b.WriteByte('-')
			}
			dash = true
			continue
		}
		dash = false
		b.WriteByte(c)
	}
	return b.String()
}
