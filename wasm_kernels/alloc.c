/* The linear-memory allocator: free lists by size class over a bump pointer.
 *
 * Classes are 4 per power of two (64, 80, 96, 112, 128, 160, ...), so a block wastes at most
 * 25%. A freed block goes to its class's list and is reused by the next request of that
 * class. Memory grows (memory.grow) only here. Each block has a 16-byte header holding its
 * class, which keeps payloads 16-byte aligned for SIMD loads.
 */
#include "common.h"

#define PAGE 65536u
#define HEADER 16u
#define NCLASS 112

extern unsigned char __heap_base;

i32 er_args[256];

static uintptr_t heap_top;
static uintptr_t free_head[NCLASS];
static uint32_t bytes_in_use;

static i32 class_of(uint32_t n, uint32_t *size) {
    if (n < 64) n = 64;
    uint32_t m = n - 1;
    i32 k = 31 - __builtin_clz(m);           /* 2^k <= m < 2^(k+1), k >= 5 */
    uint32_t top = m >> (k - 2);             /* 4..7 */
    *size = (top + 1) << (k - 2);
    return (k - 5) * 4 + (i32)(top - 4);
}

static uint32_t class_size(i32 c) {
    i32 k = c / 4 + 5;
    uint32_t top = (uint32_t)(c % 4) + 4;
    return (top + 1) << (k - 2);
}

static int ensure_capacity(uintptr_t end) {
    uintptr_t have = __builtin_wasm_memory_size(0) * (uintptr_t)PAGE;
    if (end <= have) return 1;
    uintptr_t need = (end - have + PAGE - 1) / PAGE;
    uintptr_t grow = have / PAGE / 4;        /* grow by 25% at least: fewer grow calls */
    if (grow < need) grow = need;
    if (__builtin_wasm_memory_grow(0, grow) != (uintptr_t)-1) return 1;
    return __builtin_wasm_memory_grow(0, need) != (uintptr_t)-1;
}

/* A 16-byte aligned block of at least `nbytes`, or 0 when memory cannot grow. */
EXPORT uint32_t er_alloc(uint32_t nbytes) {
    if (nbytes > 0xF0000000u) return 0;
    uint32_t size;
    i32 c = class_of(nbytes + HEADER, &size);
    uintptr_t block = free_head[c];
    if (block) {
        free_head[c] = *(uintptr_t *)(block + HEADER);
    } else {
        if (!heap_top) heap_top = ((uintptr_t)&__heap_base + 15) & ~(uintptr_t)15;
        if ((uint64_t)heap_top + size > 0xFFFF0000ull) return 0;
        if (!ensure_capacity(heap_top + size)) return 0;
        block = heap_top;
        heap_top += size;
    }
    *(uint32_t *)block = (uint32_t)c;
    bytes_in_use += size;
    return (uint32_t)(block + HEADER);
}

EXPORT void er_free(uint32_t ptr) {
    if (!ptr) return;
    uintptr_t block = ptr - HEADER;
    i32 c = (i32)*(uint32_t *)block;
    bytes_in_use -= class_size(c);
    *(uintptr_t *)(block + HEADER) = free_head[c];
    free_head[c] = block;
}

EXPORT uint32_t er_bytes_in_use(void) { return bytes_in_use; }
EXPORT uint32_t er_heap_top(void) { return (uint32_t)heap_top; }
EXPORT uint32_t er_args_ptr(void) { return (uint32_t)(uintptr_t)er_args; }
