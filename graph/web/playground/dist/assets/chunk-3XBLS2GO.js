/*! Third-party notices: THIRD_PARTY_LICENSES.txt */
import{Jh as a,Kh as b,Lh as c,Mh as d}from"./chunk-6ADXLTQ7.js";import"./chunk-IJHJQXBA.js";import"./chunk-JFPDBFN4.js";export{c as HitTestContext,b as MouseTarget,d as MouseTargetFactory,a as PointerHandlerLastRenderData};
