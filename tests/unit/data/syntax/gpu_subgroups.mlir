gpu.module @kernels {
  gpu.func @reduce_rows(%m: memref<32x32xf32>, %out: memref<32xf32>, %n: i32) kernel {
    %row = gpu.block_id x
    %lane = gpu.thread_id x
    %x = memref.load %m[%row, %lane] : memref<32x32xf32>
    %sum = gpu.subgroup_reduce add %x : (f32) -> f32
    %top = gpu.subgroup_reduce maxnumf %x uniform : (f32) -> f32
    %pairs = gpu.subgroup_reduce add %x cluster(size = 2) : (f32) -> f32
    %strided = gpu.subgroup_reduce minnumf %x cluster(size = 4, stride = 8) {note} : (f32) -> f32
    %v = vector.broadcast %x : f32 to vector<2xf32>
    %vs = gpu.subgroup_reduce mul %v : (vector<2xf32>) -> vector<2xf32>
    %one = arith.constant 1 : i32
    %width = arith.constant 32 : i32
    %next, %ok = gpu.shuffle down %sum, %one, %width : f32
    %flip, %ok2 = gpu.shuffle xor %x, %one, %width : f32
    %first, %ok3 = gpu.shuffle idx %n, %one, %width {note} : i32
    %prev, %ok4 = gpu.shuffle up %v, %one, %width : vector<2xf32>
    gpu.printf "row %d: %f", %first, %sum : i32, f32
    gpu.printf "done"
    memref.store %sum, %out[%row] : memref<32xf32>
    gpu.return
  }
}

func.func @copies(%host: memref<4x8xf32>, %device: memref<4x8xf32, 1>, %t: !gpu.async.token) {
  gpu.memcpy %device, %host : memref<4x8xf32, 1>, memref<4x8xf32>
  %done = gpu.memcpy async [%t] %host, %device : memref<4x8xf32>, memref<4x8xf32, 1>
  return
}
