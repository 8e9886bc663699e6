package tenancy

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Group is the items of one statement of a batch: their places in the caller's list, and the
// statement's one client (empty for a statement of every client's items, Together).
type Group struct {
	Client string
	Items  []int
}

// Groups groups the places 0..n-1 of a batch for its statements: all in one group Together,
// else by client (GroupByClient).
func (s Spread) Groups(n int, client func(i int) string, sorted bool) []Group {
	if s == Together {
		g := Group{Items: make([]int, n)}
		for i := range n {
			g.Items[i] = i
		}
		return []Group{g}
	}
	return GroupByClient(n, client, sorted)
}

// GroupByClient groups the places 0..n-1 by their client: in the order each client first comes,
// or sorted by client (a deterministic order to lock their rows in).
func GroupByClient(n int, client func(i int) string, sorted bool) []Group {
	var groups []Group
	at := map[string]int{}
	for i := range n {
		c := client(i)
		g, ok := at[c]
		if !ok {
			g = len(groups)
			at[c] = g
			groups = append(groups, Group{Client: c})
		}
		groups[g].Items = append(groups[g].Items, i)
	}
	if sorted {
		slices.SortFunc(groups, func(a, b Group) int { return strings.Compare(a.Client, b.Client) })
	}
	return groups
}

// Args is a statement's arguments for the group: with the group's client after the others when
// it has one (the last parameter of a Statement per client).
func (g Group) Args(args []any) []any {
	if g.Client == "" {
		return args
	}
	return append(args, g.Client)
}

// Statement is one statement of a batch, rendered for each Spread.
type Statement [2]string

// clientRef is the mark NewStatement replaces: {client x}, where x is the relation whose
// client_id a tenant table's rows must match.
var clientRef = regexp.MustCompile(`\{client (\w+)\}`)

// NewStatement renders a batch statement for each spread from one text, whose items carry their
// client (a client_id column) and which marks each match of a tenant table's client_id with
// {client x}. Together, the mark is x.client_id: the statement joins every client's rows. Per
// client, it is $param::uuid, the statement's one client, passed after the other arguments
// (Group.Args): a constant a distributed database routes the statement by.
func NewStatement(sql string, param int) Statement {
	var s Statement
	s[Together] = clientRef.ReplaceAllString(sql, "$1.client_id")
	s[PerClient] = clientRef.ReplaceAllLiteralString(sql, fmt.Sprintf("$%d::uuid", param))
	return s
}

// For is the statement's text for a spread.
func (s Statement) For(spread Spread) string { return s[spread] }
