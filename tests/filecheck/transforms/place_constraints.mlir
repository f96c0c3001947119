// Constraints in the module (what --constraints FILE attaches): dhir-place honours them.
// RUN: dhir-opt %s -p 'dhir-place{ranks=3}' | filecheck %s
// RUN: dhir-opt %s -p 'dhir-place{ranks=3 algorithm=heft}' | filecheck %s

builtin.module attributes {dhir.constraints = "{\"pins\": [{\"tasks\": [\"load*\"], \"key\": \"rank\", \"value\": 2, \"entry\": \"[[pin]] #1\"}], \"groups\": [{\"kind\": \"together\", \"tasks\": [\"solve\", \"load0\"], \"entry\": \"[[together]] #1\"}, {\"kind\": \"apart\", \"tasks\": [\"a\", \"b\"], \"entry\": \"[[apart]] #1\"}], \"source\": \"c.toml\"}"} {
  func.func @f(%x: memref<4xf32>) {
    dhir.schedule %x {
      %cpu = dhir.target {arch = "x86_64"}
      // CHECK: %load0 = dhir.task %cpu, %x attributes {dhir.rank = 2 : i64}
      %load0 = dhir.task %cpu, %x {}
      // CHECK: %solve = dhir.task %cpu, %x attributes {dhir.rank = 2 : i64}
      %solve = dhir.task %cpu, %x {}
      // CHECK: %a = dhir.task %cpu, %x attributes {dhir.rank = [[A:[0-9]]] : i64}
      %a = dhir.task %cpu, %x {}
      // CHECK-NOT: %b = dhir.task %cpu, %x attributes {dhir.rank = [[A]] : i64}
      // CHECK: %b = dhir.task
      %b = dhir.task %cpu, %x {}
    }
    func.return
  }
}
