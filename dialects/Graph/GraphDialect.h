//===- GraphDialect.h - partc graph dialect ---------------------*- C++ -*-===//
#ifndef PARTC_DIALECTS_GRAPH_GRAPHDIALECT_H
#define PARTC_DIALECTS_GRAPH_GRAPHDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/Graph/GraphDialect.h.inc"

#endif // PARTC_DIALECTS_GRAPH_GRAPHDIALECT_H
