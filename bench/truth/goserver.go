// An HTTP server written in Go, for bench/truth/gowork.py: each path is one activity, a request does
// about 5-20 ms of the activity's work on the Go standard library and answers a short digest.
// Listens on the Unix socket given as its argument and exits 0 on SIGTERM; GOMAXPROCS is left to the caller.
package main

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/template"
)

type record struct {
	ID    int               `json:"id"`
	Name  string            `json:"name"`
	Tags  []string          `json:"tags"`
	Score float64           `json:"score"`
	Attrs map[string]string `json:"attrs"`
}

var (
	text    = strings.Repeat("the quick brown fox 12345 jumps over the lazy dog; user@example.com 3.14159 ", 400)
	records []record
	pattern = regexp.MustCompile(`([a-z]+)@([a-z]+)\.com|[0-9]+\.[0-9]+|qu[a-z]*k`)
	page    = template.Must(template.New("p").Parse(
		`{{range .}}<tr><td>{{.ID}}</td><td>{{.Name | printf "%q"}}</td>{{range .Tags}}<i>{{.}}</i>{{end}}</tr>{{end}}`))
)

func init() {
	for i := 0; i < 400; i++ {
		records = append(records, record{i, "item-" + strconv.Itoa(i*7919), []string{"a", "bb", strconv.Itoa(i)},
			float64(i) * 1.5, map[string]string{"k": strconv.Itoa(i % 13), "v": "value"}})
	}
}

func actJSON() uint64 {
	var n uint64
	for r := 0; r < 6; r++ {
		b, _ := json.Marshal(records)
		var back []record
		json.Unmarshal(b, &back)
		n += uint64(len(b) + len(back))
	}
	return n
}

func actRegex() uint64 {
	return uint64(len(pattern.FindAllStringIndex(text, -1)))
}

func actSHA() uint64 {
	buf := []byte(text)
	var s [32]byte
	for r := 0; r < 40; r++ {
		s = sha256.Sum256(append(buf, s[:]...))
	}
	return uint64(s[0])
}

func actDeflate() uint64 {
	var out bytes.Buffer
	w, _ := flate.NewWriter(&out, 6)
	w.Write([]byte(text))
	w.Close()
	return uint64(out.Len())
}

func actSort() uint64 {
	xs := make([]string, 20000)
	for i := range xs {
		xs[i] = strconv.Itoa((i * 7919) % 20011)
	}
	sort.Strings(xs)
	return uint64(len(xs[0]))
}

func actBigint() uint64 {
	x := big.NewInt(1)
	for i := int64(1); i < 900; i++ {
		x.Mul(x, big.NewInt(i))
	}
	return uint64(x.BitLen())
}

func actTemplate() uint64 {
	var out bytes.Buffer
	for r := 0; r < 6; r++ {
		page.Execute(&out, records)
	}
	return uint64(out.Len())
}

func actStrconv() uint64 {
	var n uint64
	for i := 0; i < 60000; i++ {
		f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(i)*1.37, 'g', -1, 64), 64)
		n += uint64(f)
	}
	return n
}

func actMap() uint64 {
	m := make(map[string]int)
	for i := 0; i < 60000; i++ {
		m["k"+strconv.Itoa(i%9000)] += i
	}
	return uint64(len(m))
}

func actCRC() uint64 {
	buf := []byte(text)
	var s uint32
	for r := 0; r < 300; r++ {
		s = crc32.Update(s, crc32.IEEETable, buf)
	}
	return uint64(s)
}

// kinds: each activity is a function named act<Kind>, so a sample's call stack names its activity
// (bench/truth/stack_truth.py).
var kinds = map[string]func() uint64{
	"json":     actJSON,
	"regex":    actRegex,
	"sha":      actSHA,
	"deflate":  actDeflate,
	"sort":     actSort,
	"bigint":   actBigint,
	"template": actTemplate,
	"strconv":  actStrconv,
	"map":      actMap,
	"crc":      actCRC,
}

func main() {
	for name, work := range kinds {
		work := work
		http.HandleFunc("/"+name, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%d\n", work())
		})
	}
	os.Remove(os.Args[1])
	ln, err := net.Listen("unix", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	go func() { <-stop; os.Exit(0) }() // a stopped server is a normal end
	fmt.Println("ready")
	http.Serve(ln, nil)
}
