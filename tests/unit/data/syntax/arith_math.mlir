func.func @scalars(%a: i32, %b: i32, %x: f32, %y: f64, %i: index, %c: i1) -> i32 {
  %0 = arith.addi %a, %b : i32
  %1 = arith.muli %0, %b overflow<nsw> : i32
  %2 = arith.divsi %1, %a : i32
  %3 = arith.remui %2, %b : i32
  %4 = arith.cmpi slt, %3, %a : i32
  %5 = arith.select %4, %3, %a : i32
  %6 = arith.addf %x, %x fastmath<fast> : f32
  %7 = arith.cmpf oge, %6, %x : f32
  %8 = arith.extf %6 : f32 to f64
  %9 = arith.truncf %y : f64 to f32
  %t1 = arith.truncf %y downward fastmath<contract> : f64 to f32
  %t2 = arith.truncf %y to_nearest_away : f64 to f32
  %e1 = arith.extf %x fastmath<nnan> : f32 to f64
  %10 = arith.sitofp %a : i32 to f32
  %11 = arith.fptosi %9 : f32 to i32
  %12 = arith.index_cast %i : index to i32
  %13 = arith.index_castui %a : i32 to index
  %14 = arith.extui %c : i1 to i32
  %15 = arith.maximumf %x, %9 : f32
  %16 = arith.negf %15 : f32
  %17 = arith.bitcast %16 : f32 to i32
  %18 = math.exp %x : f32
  %19 = math.sqrt %y : f64
  %20 = math.powf %x, %18 : f32
  %21 = math.fma %x, %x, %x : f32
  %22 = math.absi %a : i32
  %23 = math.log1p %x fastmath<nnan> : f32
  %24 = math.ipowi %a, %b : i32
  %25 = arith.shli %a, %b : i32
  %26 = arith.xori %25, %b : i32
  %27 = arith.constant dense<1.0> : vector<4xf32>
  %28 = arith.addf %27, %27 : vector<4xf32>
  cf.cond_br %c, ^t(%26 : i32), ^f
^t(%r: i32):
  return %r : i32
^f:
  cf.br ^t(%a : i32)
}
func.func private @ext(f32) -> f32
func.func @calls(%x: f32) -> f32 {
  %0 = func.call @ext(%x) : (f32) -> f32
  %1 = call @ext(%0) : (f32) -> f32
  return %1 : f32
}
