/* SPDX-License-Identifier: Apache-2.0 */
/* stb_image's PNG decoder compiled into the jpeg fuzz target (which reads PNG too): the sanitizers
 * then see inside it, which they do not in the library's uninstrumented copy (-lstb, still linked
 * for stb_image_resize). Only PNG is built: transform.c hands stb_image nothing else.
 * pointer-overflow and nonnull-attribute are left unchecked in it: when the first IDAT chunk is
 * empty (legal PNG), stb_image 2.27 computes z->idata + 0 and memcpy(z->idata, src, 0) with idata
 * still NULL, which UBSan reports and which do nothing; every other check stays. */
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#pragma clang attribute push(__attribute__((no_sanitize("pointer-overflow", "nonnull-attribute"))), apply_to = function)
#include <stb/stb_image.h>
#pragma clang attribute pop
