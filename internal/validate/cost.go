package validate

// The per-validation work bound.
//
// gojsonschema v1.2.0 cannot be interrupted, keeps every error it creates
// (about 1 KiB each, also inside anyOf/oneOf branches it later discards)
// and recompiles each patternProperties pattern for every key, so no
// static cap on schema and value sizes alone keeps one validation small.
// Before the library runs, the estimator walks the compiled schema model
// and the decoded value together the way validation.go does, deciding every
// assertion exactly as the library will (types, counts, required, numeric
// bounds and multipleOf in exact arithmetic, const/enum/uniqueItems with
// the library's own equality, patterns with the same regular expressions,
// formats with the library's own checkers), so that it follows the same
// path: which anyOf branch stops the search, which oneOf branches pass,
// whether "if" holds, which keys patternProperties and additionalProperties
// apply to, how many errors are made and copied. It adds up the work in
// calibrated units (coefficients below), the decoding of the value and its
// own pattern and format checks included, and refuses the value when the
// predicted time or allocation exceeds the budget. The walk stops as soon
// as the budget is exceeded, and every step it takes is itself charged, so
// the estimator's own cost is bounded too.
const (
	BudgetTime  = 30e6     // predicted nanoseconds per validation: decoding, estimate and library
	BudgetBytes = 24 << 20 // predicted bytes allocated per validation, the same
)

// estimate is one run of the estimator.
type estimate struct {
	ns, bytes float64
	over      bool
	evals     int
	// imprecise is set when a number could compare wrongly in const, enum or
	// uniqueItems (the library compares them as float64).
	imprecise *ValueError
	root      *vnode
}

func (e *estimate) add(ns, b float64) {
	e.ns += ns
	e.bytes += b * bytesMargin
	if e.ns > BudgetTime || e.bytes > BudgetBytes {
		e.over = true
	}
}

// estimateCost estimates the cost of validating v (decoded from rawLen
// bytes) against the schema model n, the decoding included.
func estimateCost(n *cnode, v *vnode, rawLen int) *estimate { return estimateWith(n, v, rawLen, 0) }

// estimateWith is estimateCost with work done before it charged: the
// ECMAScript matches of property names (ecma_keys.go), in ns.
func estimateWith(n *cnode, v *vnode, rawLen int, doneNs float64) *estimate {
	e := &estimate{root: v}
	e.add(doneNs, 0)
	e.add(coef.baseNs+coef.decNodeNs*float64(v.nodes)+coef.decByteNs*float64(rawLen),
		coef.baseB+coef.decNodeB*float64(v.nodes)+coef.decByteB*float64(rawLen))
	e.eval(n, v, len("(root)"))
	return e
}

func (e *estimate) err(pathLen, detail int) float64 {
	text := float64(3*pathLen + detail + 48)
	e.add(coef.errNs+text*coef.textNs, coef.errB+text*coef.textB)
	return 1
}

// numeric charges one numeric keyword on an instance number: the big.Rat
// comparison (or division, for multipleOf) and, when it fails, an error
// whose text renders the keyword value. Bounds are decided exactly;
// multipleOf only when the arithmetic fits in 64 bits.
func (e *estimate) numeric(k *numKw, x *numInfo, pl int) float64 {
	xn, xd := decimalSize(x)
	mn, md := decimalSize(k.lit)
	sz := float64(xn + xd + mn + md)
	quad := coef.cmpQuadNs
	if k.name == "multipleOf" {
		quad = coef.quoQuadNs
	}
	e.add(coef.cmpNs+quad*sz*sz, coef.cmpB+coef.cmpByteB*sz)
	c := cmpDecimal(x, k.lit)
	var fails bool
	switch k.name {
	case "maximum":
		fails = c > 0
	case "exclusiveMaximum":
		fails = c >= 0
	case "minimum":
		fails = c < 0
	case "exclusiveMinimum":
		fails = c <= 0
	default:
		isMult, known := multipleOf(x, k.lit)
		if !known {
			// our exact check in big integers: 10^|Δexp| and a remainder
			d := float64(len(x.digits) + len(k.lit.digits) + abs(x.exp-k.lit.exp))
			e.add(500+0.05*d*d, 32*d+512)
			isMult = multipleOfBig(x, k.lit)
		}
		fails = !isMult
	}
	if !fails {
		return 0
	}
	e.add(coef.numErrNs+k.errNs, coef.numErrB+k.errB)
	return e.err(pl, 24)
}

func (e *estimate) merge(k float64) {
	if k > 0 {
		e.add(k*coef.mergeNs, k*coef.mergeB)
	}
}

func (e *estimate) parse(ni *numInfo) {
	exp := float64(len(ni.lit))
	if !ni.isZero() { // zeros reach the library as "0" (scan.go)
		exp += float64(abs(ni.litExp))
	}
	l := float64(len(ni.lit))
	e.add(coef.parseNs+l*coef.parseCharNs+exp*coef.parseExpNs, coef.parseB+l*coef.parseCharB+exp*coef.parseExpB)
}

func (e *estimate) marshal(size int) {
	e.add(float64(size)*coef.marshalNs, float64(size)*coef.marshalB)
}

// sub charges a sub-result evaluation of n at v and returns its errors.
func (e *estimate) sub(n *cnode, v *vnode, pathLen int) float64 {
	e.add(coef.subNs, coef.subB)
	return e.eval(n, v, pathLen)
}

func (e *estimate) eval(n *cnode, v *vnode, pl int) float64 {
	if e.over {
		return 0
	}
	e.evals++
	e.add(coef.evalNs, coef.evalB)
	if n.pass != 0 {
		if n.pass < 0 {
			return e.err(pl, 0)
		}
		return 0
	}
	if n.ref != nil {
		return e.eval(n.ref, v, pl)
	}
	if v.kind == kNumber {
		e.parse(v.num) // checkJSONInteger, before the type check
	}
	if n.types != 0 && !typeOK(n.types, v) {
		return e.err(pl, n.tlen+8)
	}
	errs := e.applicators(n, v, pl)
	switch v.kind {
	case kNumber:
		e.parse(v.num)
		for i := range n.numKws {
			errs += e.numeric(&n.numKws[i], v.num, pl)
		}
	case kString:
		errs += e.str(n, v, pl)
	case kArray:
		errs += e.array(n, v, pl)
	case kObject:
		errs += e.object(n, v, pl)
	}
	errs += e.common(n, v, pl)
	if v.kind == kObject && n.props != nil {
		for i := range v.keys {
			if e.over {
				return errs
			}
			k := &v.keys[i]
			if c := n.props[k.name]; c != nil {
				e.add(coef.ctxNs, coef.ctxB)
				errs += e.eval(c, &v.kids[i], pl+1+len(k.name))
			}
		}
	}
	return errs
}

func typeOK(types uint8, v *vnode) bool {
	switch v.kind {
	case kNull:
		return types&tNull != 0
	case kBool:
		return types&tBool != 0
	case kString:
		return types&tString != 0
	case kArray:
		return types&tArray != 0
	case kObject:
		return types&tObject != 0
	}
	return types&tNumber != 0 || (types&tInteger != 0 && v.num.isInt())
}

// applicators: validateSchema (anyOf, oneOf, allOf, not, dependencies,
// if/then/else).
func (e *estimate) applicators(n *cnode, v *vnode, pl int) float64 {
	errs := 0.0
	if len(n.anyOf) > 0 {
		errs += e.anyOf(n.anyOf, v, pl)
	}
	if len(n.oneOf) > 0 {
		errs += e.oneOf(n.oneOf, v, pl)
	}
	if len(n.allOf) > 0 {
		errs += e.allOf(n.allOf, v, pl)
	}
	if n.not != nil && e.sub(n.not, v, pl) == 0 {
		errs += e.err(pl, 0)
	}
	if n.deps != nil {
		k, stopped := e.dependencies(n.deps, v, pl)
		errs += k
		if stopped {
			return errs
		}
	}
	if n.ifS != nil {
		errs += e.conditional(n, v, pl)
	}
	return errs
}

// anyOf: the library stops at the first valid branch; a branch with no
// possible error is valid, so stopping there too is safe.
func (e *estimate) anyOf(branches []*cnode, v *vnode, pl int) float64 {
	best := 0.0
	for _, b := range branches {
		k := e.sub(b, v, pl)
		if k == 0 {
			return 0
		}
		best = max(best, k)
	}
	e.merge(best)
	e.err(pl, 0)
	return 1 + best
}

// oneOf: every branch is evaluated; the errors of the worst one are kept
// when none passes.
func (e *estimate) oneOf(branches []*cnode, v *vnode, pl int) float64 {
	best, valid := 0.0, 0
	for _, b := range branches {
		k := e.sub(b, v, pl)
		if k == 0 {
			valid++
		}
		best = max(best, k)
	}
	if valid == 1 {
		return 0
	}
	e.err(pl, 0)
	if valid != 0 {
		return 1
	}
	e.merge(best)
	return 1 + best
}

// allOf: every branch is evaluated and its errors kept.
func (e *estimate) allOf(branches []*cnode, v *vnode, pl int) float64 {
	sum := 0.0
	for _, b := range branches {
		k := e.sub(b, v, pl)
		e.merge(k)
		sum += k
	}
	if sum == 0 {
		return 0
	}
	e.err(pl, 0)
	return 1 + sum
}

// dependencies: each key of an object looked up; stopped is true when the
// budget ran out on the way.
func (e *estimate) dependencies(deps map[string]dep, v *vnode, pl int) (errs float64, stopped bool) {
	if v.kind == kNumber {
		e.parse(v.num) // isKind(Map) parses numbers
	}
	if v.kind != kObject {
		return 0, false
	}
	obj := v.val.(map[string]any)
	for _, k := range v.keys {
		if e.over {
			return errs, true
		}
		e.add(coef.iterNs, 0)
		d, ok := deps[k.name]
		if !ok {
			continue
		}
		for _, name := range d.names {
			if _, present := obj[name]; !present {
				errs += e.err(pl, len(name))
			}
		}
		if d.node != nil {
			errs += e.eval(d.node, v, pl)
		}
	}
	return errs, false
}

// conditional: "if", then the branch it selects.
func (e *estimate) conditional(n *cnode, v *vnode, pl int) float64 {
	ifErrs := e.sub(n.ifS, v, pl)
	branch := 0.0
	if n.thenS != nil && ifErrs == 0 {
		branch = e.sub(n.thenS, v, pl)
	}
	if n.elseS != nil && ifErrs > 0 {
		branch = e.sub(n.elseS, v, pl)
	}
	if branch == 0 {
		return 0
	}
	e.merge(branch)
	e.err(pl, 0)
	return 1 + branch
}

func (e *estimate) str(n *cnode, v *vnode, pl int) float64 {
	s := v.val.(string)
	errs := 0.0
	if n.minLen >= 0 {
		e.add(float64(len(s))*coef.lenNs, float64(len(s))*coef.lenB)
		if int(v.runes) < n.minLen {
			errs += e.err(pl, 12)
		}
	}
	if n.maxLen >= 0 {
		e.add(float64(len(s))*coef.lenNs, float64(len(s))*coef.lenB)
		if int(v.runes) > n.maxLen {
			errs += e.err(pl, 12)
		}
	}
	if p := n.pat; p != nil {
		// the library's match and ours
		e.add(2*matchCost(p, len(s)), 2*regexBytes(p.insts))
		if e.over {
			return errs
		}
		if !p.re.MatchString(s) {
			errs += e.err(pl, len(p.src))
		}
	}
	if n.ecma != nil {
		matched, ok := e.ecmaMatch(n.ecma, s)
		if !ok {
			return errs
		}
		if !matched {
			errs += e.err(pl, len(n.ecma.src))
		}
	}
	if n.enumSet != nil {
		// the library's lookup (and its format registry's lock)
		e.add(enumSetNs+float64(len(s))*enumSetByteNs, enumSetB)
		if !n.enumSet.values[s] {
			errs += e.err(pl, len(n.enumSet.name))
		}
	}
	if n.format != "" {
		// the library's check and ours
		ns, b := formatCheckCost(n.format, s)
		e.add(2*ns, 2*b)
		if e.over {
			return errs
		}
		if !isFormat(n.format, s) {
			errs += e.err(pl, len(n.format))
		}
	}
	return errs
}

func (e *estimate) array(n *cnode, v *vnode, pl int) float64 {
	errs, stopped := e.items(n, v, pl)
	if stopped {
		return errs
	}
	if n.minItems >= 0 && len(v.kids) < n.minItems {
		errs += e.err(pl, 12)
	}
	if n.maxItems >= 0 && len(v.kids) > n.maxItems {
		errs += e.err(pl, 12)
	}
	if n.unique && !e.over {
		e.marshal(int(v.size))
		e.add(float64(len(v.kids))*coef.uniqNs, float64(len(v.kids))*coef.uniqB)
		if !e.over {
			errs += e.uniqueErrors(v, pl)
		}
	}
	if n.contains != nil {
		k, stopped := e.contains(n.contains, v, pl)
		errs += k
		if stopped {
			return errs
		}
	}
	return errs
}

// items: items (one schema or a tuple) and additionalItems; stopped is
// true when the budget ran out on the way.
func (e *estimate) items(n *cnode, v *vnode, pl int) (errs float64, stopped bool) {
	item := func(c *cnode, i int) {
		e.add(coef.iterNs+coef.ctxNs, coef.ctxB)
		k := e.sub(c, &v.kids[i], pl+1+digits(i))
		e.merge(k)
		errs += k
	}
	switch {
	case n.itemsOne != nil:
		for i := range v.kids {
			if e.over {
				return errs, true
			}
			item(n.itemsOne, i)
		}
	case len(n.itemsTuple) > 0:
		for i := range min(len(n.itemsTuple), len(v.kids)) {
			if e.over {
				return errs, true
			}
			item(n.itemsTuple[i], i)
		}
		if len(v.kids) <= len(n.itemsTuple) {
			break
		}
		switch {
		case n.addItemsFalse:
			errs += e.err(pl, 0)
		case n.addItems != nil:
			for i := len(n.itemsTuple); i < len(v.kids); i++ {
				if e.over {
					return errs, true
				}
				item(n.addItems, i)
			}
		}
	}
	return errs, false
}

// contains: the library stops at the first item that matches; an item
// with no possible error matches, so stopping there too is safe. stopped
// is true when the budget ran out on the way.
func (e *estimate) contains(c *cnode, v *vnode, pl int) (errs float64, stopped bool) {
	best := 0.0
	for i := range v.kids {
		if e.over {
			return 0, true
		}
		e.add(coef.iterNs+coef.ctxNs, coef.ctxB)
		k := e.sub(c, &v.kids[i], pl+1+digits(i))
		if k == 0 {
			return 0, false
		}
		best = max(best, k)
	}
	e.merge(best)
	e.err(pl, 0)
	return 1 + best, false
}

// uniqueErrors counts the duplicate errors uniqueItems reports (each item
// equal to an earlier one, as the library compares them), and looks for
// numbers the library cannot tell apart.
func (e *estimate) uniqueErrors(v *vnode, pl int) float64 {
	seen := make(map[string]bool, len(v.kids))
	errs := 0.0
	for i := range v.kids {
		k := canonical(v.kids[i].val, false)
		if seen[k] {
			errs += e.err(pl, 16)
		}
		seen[k] = true
	}
	if v.nums > 1 && e.imprecise == nil {
		floats := map[float64]*numInfo{}
		forNumbers(v, func(ni *numInfo) bool {
			if o, ok := floats[ni.f]; ok && !o.exactEqual(ni) {
				e.flagImprecise(ni, o, "uniqueItems")
				return false
			}
			floats[ni.f] = ni
			return true
		})
	}
	return errs
}

func (e *estimate) object(n *cnode, v *vnode, pl int) float64 {
	errs := 0.0
	if n.minProps >= 0 && len(v.keys) < n.minProps {
		errs += e.err(pl, 12)
	}
	if n.maxProps >= 0 && len(v.keys) > n.maxProps {
		errs += e.err(pl, 12)
	}
	if len(n.required) > 0 {
		obj := v.val.(map[string]any)
		for _, r := range n.required {
			if _, ok := obj[r]; !ok {
				errs += e.err(pl, len(r))
			}
		}
	}
	k, stopped := e.members(n, v, pl)
	errs += k
	if stopped {
		return errs
	}
	if n.propNames != nil {
		errs += e.propertyNames(n.propNames, v, pl)
	}
	return errs
}

// members: each member's properties, patternProperties and
// additionalProperties; stopped is true when the budget ran out on the
// way.
func (e *estimate) members(n *cnode, v *vnode, pl int) (errs float64, stopped bool) {
	nProps := float64(len(n.props))
	for i := range v.keys {
		if e.over {
			return errs, true
		}
		k := &v.keys[i]
		kpl := pl + 1 + len(k.name)
		e.add(coef.iterNs+nProps*coef.keyCmpNs, 0)
		matched := false
		for _, pp := range n.patProps {
			// the library recompiles and matches; we match once more
			ns, b := recompileCost(pp.pat)
			e.add(ns+2*matchCost(pp.pat, len(k.name)), b+2*regexBytes(pp.pat.insts))
			if e.over || !pp.pat.re.MatchString(k.name) {
				continue
			}
			matched = true
			e.add(coef.ctxNs, coef.ctxB)
			c := e.sub(pp.node, &v.kids[i], kpl)
			e.merge(c)
			errs += c
		}
		if n.props[k.name] == nil && !matched {
			switch {
			case n.addPropsFalse:
				errs += e.err(pl, len(k.name))
			case n.addProps != nil:
				e.add(coef.ctxNs, coef.ctxB)
				c := e.sub(n.addProps, &v.kids[i], kpl)
				e.merge(c)
				errs += c
			}
		}
	}
	return errs, false
}

// propertyNames: each name validated as a string.
func (e *estimate) propertyNames(names *cnode, v *vnode, pl int) float64 {
	errs := 0.0
	for i := range v.keys {
		if e.over {
			return errs
		}
		k := &v.keys[i]
		key := vnode{val: k.name, kind: kString, runes: k.runes, size: k.size}
		c := e.sub(names, &key, pl)
		if c > 0 {
			e.merge(c)
			errs += 1 + c
			e.err(pl, len(k.name))
		}
	}
	return errs
}

// common: const and enum. Whether they fail is decided exactly, with the
// library's own notion of equality (numbers as float64).
func (e *estimate) common(n *cnode, v *vnode, pl int) float64 {
	if !n.hasConst && !n.enum {
		return 0
	}
	errs := 0.0
	key := ""
	if n.hasConst {
		e.marshal(int(v.size))
		if e.over {
			return errs
		}
		key = canonical(v.val, false)
		if key != n.constKey {
			errs += e.err(pl, pl+n.constLen)
		}
		e.checkPrecision(v, n.constNums, "const")
	}
	if n.enum {
		e.marshal(int(v.size))
		if e.over {
			return errs
		}
		if key == "" {
			key = canonical(v.val, false)
		}
		if !n.enumKeys[key] {
			e.add(0, float64(n.enumLen))
			errs += e.err(pl, pl+n.enumLen)
		}
		e.checkPrecision(v, n.enumNums, "enum")
	}
	return errs
}

// ecmaMatch runs an ECMAScript pattern (ecma.go) and charges what it
// took, twice: the library runs it again. Backtracking makes its cost
// depend on the pattern and the input in ways no formula bounds, so it is
// measured, in the CPU time of the thread that ran it (threadCPU). A match
// that overruns its deadline or its backtracking stack puts the value over
// the budget (ok false).
func (e *estimate) ecmaMatch(p *ecmaEntry, s string) (matched, ok bool) {
	if e.over {
		return false, false
	}
	var err error
	took := float64(threadCPU(func() { matched, err = p.re.MatchString(s) }))
	e.add(2*(took+coef.matchFixedNs), 2*(ecmaFixedB+ecmaRuneB*float64(len(s))))
	if err != nil {
		e.over = true
		return false, false
	}
	return matched, !e.over
}
