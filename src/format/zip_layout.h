/* ZIP record signatures, sizes and field limits (APPNOTE.TXT 4.3), shared by
 * the torch.save container reader and writer. */
#ifndef CKPTFS_FORMAT_ZIP_LAYOUT_H
#define CKPTFS_FORMAT_ZIP_LAYOUT_H

#define ZIP_LOCAL_SIG        0x04034b50u   /* "PK\3\4" */
#define ZIP_CENTRAL_SIG      0x02014b50u   /* "PK\1\2" */
#define ZIP_DESCRIPTOR_SIG   0x08074b50u   /* "PK\7\8" */
#define ZIP_EOCD_SIG         0x06054b50u   /* "PK\5\6" */
#define ZIP64_EOCD_SIG       0x06064b50u   /* "PK\6\6" */
#define ZIP64_LOCATOR_SIG    0x07064b50u   /* "PK\6\7" */

#define ZIP_LOCAL_SIZE       30
#define ZIP_CENTRAL_SIZE     46
#define ZIP_EOCD_SIZE        22
#define ZIP64_EOCD_SIZE      56
#define ZIP64_LOCATOR_SIZE   20
#define ZIP_MAX_COMMENT      0xffffu

#define ZIP64_EXTRA_ID       0x0001u
#define ZIP_FLAG_ENCRYPTED   0x0001u
#define ZIP_FLAG_DESCRIPTOR  0x0008u
#define ZIP_FLAG_STRONG_ENC  0x0040u
#define ZIP_FLAG_UTF8        0x0800u

/* Field values that mean "the real value is in the zip64 extra field". */
#define ZIP_MAX16            0xffffu
#define ZIP_MAX32            0xffffffffu

/* PyTorch's padding extra field: 'F' 'B', u16 length, that many 'Z'. */
#define TORCH_PAD_ID_0       'F'
#define TORCH_PAD_ID_1       'B'
#define TORCH_PAD_BYTE       'Z'

#endif
