func.func @f(%a: index, %b: index, %i: i32, %c: i1, %x: f32) {
  %idx42 = index.constant 42
  %idx-9223372036854775808 = index.constant -9223372036854775808
  %true = index.bool.constant true
  %false = index.bool.constant false
  %0 = index.add %a, %b
  %1 = index.sub %a, %b
  %2 = index.mul %a, %b
  %3 = index.divs %a, %b
  %4 = index.divu %a, %b
  %5 = index.ceildivs %a, %b
  %6 = index.ceildivu %a, %b
  %7 = index.floordivs %a, %b
  %8 = index.rems %a, %b
  %9 = index.remu %a, %b
  %10 = index.maxs %a, %b
  %11 = index.maxu %a, %b
  %12 = index.mins %a, %b
  %13 = index.minu %a, %b
  %14 = index.shl %a, %b
  %15 = index.shrs %a, %b
  %16 = index.shru %a, %b
  %17 = index.and %a, %b
  %18 = index.or %a, %b
  %19 = index.xor %a, %b {tag}
  %20 = index.cmp eq(%a, %b)
  %21 = index.cmp uge(%a, %b) {tag}
  %22 = index.casts %i : i32 to index
  %23 = index.castu %a : index to i32
  %24 = index.casts %c : i1 to index
  %25 = index.sizeof
  return
}
